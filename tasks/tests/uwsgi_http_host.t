#!/usr/bin/perl

# Written for nginx-eval in the style of nginx-tests.

# Tests for the HTTP_HOST variable uwsgi passes: the host the request is for,
# also when the request line names it (absolute form).  The uwsgi server is
# a minimal one in this file.

###############################################################################

use warnings;
use strict;

use Test::More;

use IO::Socket::INET;

BEGIN { use FindBin; chdir($FindBin::Bin); }

use lib 'lib';
use Test::Nginx;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http uwsgi/)->plan(4)
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
            uwsgi_pass 127.0.0.1:8081;
            uwsgi_param REQUEST_URI $request_uri;
        }
    }
}

EOF

$t->run_daemon(\&uwsgi_daemon);
$t->run()->waitforsocket('127.0.0.1:' . port(8081));

###############################################################################

like(get('/', 'example.com'), qr/host:example\.com:/, 'host header');
like(get('/', 'example.com:8080'), qr/host:example\.com:8080:/,
	'host header with port');

# RFC 9112, 3.2.2: a request target in the absolute form names the host,
# and the Host header is ignored

like(get('http://example.org/', 'example.com'), qr/host:example\.org:/,
	'absolute form');
like(get('http://example.org:8080/', 'example.com'),
	qr/host:example\.org:8080:/, 'absolute form with port');

###############################################################################

sub get {
	my ($uri, $host) = @_;
	http(<<EOF);
GET $uri HTTP/1.1
Host: $host
Connection: close

EOF
}

# a uwsgi packet: modifier1, the size of the variables (16 bits, little
# endian) and modifier2, then each variable as a 16-bit length and a key,
# a 16-bit length and a value; the response is an HTTP response

sub uwsgi_daemon {
	my $server = IO::Socket::INET->new(
		Proto => 'tcp',
		LocalHost => '127.0.0.1:' . port(8081),
		Listen => 5,
		Reuse => 1
	)
		or die "Can't create listening socket: $!\n";

	local $SIG{PIPE} = 'IGNORE';

	while (my $client = $server->accept()) {
		my ($header, $vars) = ('', '');

		next unless read_exactly($client, \$header, 4);
		my (undef, $size) = unpack('Cv', $header);
		next unless read_exactly($client, \$vars, $size);

		my %env;
		while (length $vars >= 2) {
			my $klen = unpack('v', substr($vars, 0, 2, ''));
			my $key = substr($vars, 0, $klen, '');
			my $vlen = unpack('v', substr($vars, 0, 2, ''));
			$env{$key} = substr($vars, 0, $vlen, '');
		}

		my $host = $env{HTTP_HOST} // '(none)';

		print $client "HTTP/1.0 200 OK\r\n"
			. "Content-Type: text/plain\r\n\r\n"
			. "host:$host:\n";

		close $client;
	}
}

sub read_exactly {
	my ($client, $buf, $n) = @_;
	while (length $$buf < $n) {
		my $got = $client->sysread($$buf, $n - length $$buf, length $$buf);
		return 0 unless $got;
	}
	return 1;
}

###############################################################################
