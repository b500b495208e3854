#!/usr/bin/perl

# Written for nginx-eval in the style of nginx-tests.

# Tests for proxy with an upstream that sends more than one 103 (Early Hints)
# response before the final one.

###############################################################################

use warnings;
use strict;

use Test::More;

use IO::Socket::INET;
use Socket qw/ CRLF /;

BEGIN { use FindBin; chdir($FindBin::Bin); }

use lib 'lib';
use Test::Nginx;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http proxy/)->plan(6)
	->write_file_expand('nginx.conf', <<'EOF');

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    server {
        listen       127.0.0.1:8080;
        server_name  localhost;

        location / {
            proxy_pass http://127.0.0.1:8081;
            proxy_http_version 1.1;
        }

        location /hints/ {
            proxy_pass http://127.0.0.1:8081/;
            proxy_http_version 1.1;
            early_hints 1;
        }
    }
}

EOF

$t->run_daemon(\&http_daemon);
$t->run()->waitforsocket('127.0.0.1:' . port(8081));

###############################################################################

# the final response follows whatever number of 103 responses: nginx's
# own response header (with its Server field), then the body

my $final = qr/^HTTP\/1\.1 200 OK\x0d\x0a(?:[^\x0d]+\x0d\x0a)*?Server: nginx.*?\x0d\x0a\x0d\x0aSEE-THIS\z/s;

like(final('/one'), $final, 'one 103');
like(final('/two'), $final, 'two 103');
like(final('/three'), $final, 'three 103');

like(final('/hints/one'), $final, 'one 103, hints passed');
like(final('/hints/two'), $final, 'two 103, hints passed');
like(final('/hints/three'), $final, 'three 103, hints passed');

###############################################################################

# the response after the informational (1xx) ones the client got

sub final {
	my ($uri) = @_;
	my $r = http(<<EOF);
GET $uri HTTP/1.1
Host: localhost
Connection: close

EOF
	1 while $r =~ s/^HTTP\/1\.1 1\d\d [^\x0d]*\x0d\x0a(?:[^\x0d]+\x0d\x0a)*\x0d\x0a//;
	return $r;
}

sub http_daemon {
	my $server = IO::Socket::INET->new(
		Proto => 'tcp',
		LocalHost => '127.0.0.1:' . port(8081),
		Listen => 5,
		Reuse => 1
	)
		or die "Can't create listening socket: $!\n";

	local $SIG{PIPE} = 'IGNORE';

	while (my $client = $server->accept()) {
		$client->autoflush(1);

		my $headers = '';

		while (<$client>) {
			$headers .= $_;
			last if (/^\x0d?\x0a?$/);
		}

		next if $headers eq '';

		my $n = $headers =~ m!^\S+ /three! ? 3
			: $headers =~ m!^\S+ /two! ? 2 : 1;

		# all of the response in one write: nginx reads the 103
		# responses and the final one at once

		my $hint = "HTTP/1.1 103 Early Hints" . CRLF
			. "Link: </style.css>; rel=preload; as=style" . CRLF . CRLF;

		print $client $hint x $n
			. "HTTP/1.1 200 OK" . CRLF
			. "Content-Length: 8" . CRLF
			. "Connection: close" . CRLF . CRLF
			. "SEE-THIS";

		close $client;
	}
}

###############################################################################
