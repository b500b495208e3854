#!/usr/bin/perl

# Written for nginx-eval in the style of nginx-tests.

# Tests for the HTTP_HOST parameter fastcgi passes: the host the request is
# for, also when the request line names it (absolute form).

###############################################################################

use warnings;
use strict;

use Test::More;

BEGIN { use FindBin; chdir($FindBin::Bin); }

use lib 'lib';
use Test::Nginx;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

eval { require FCGI; };
plan(skip_all => 'FCGI not installed') if $@;

my $t = Test::Nginx->new()->has(qw/http fastcgi/)->plan(4)
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
            fastcgi_pass 127.0.0.1:8081;
            fastcgi_param REQUEST_URI $request_uri;
        }
    }
}

EOF

$t->run_daemon(\&fastcgi_daemon);
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

sub fastcgi_daemon {
	my $socket = FCGI::OpenSocket('127.0.0.1:' . port(8081), 5);
	my $request = FCGI::Request(\*STDIN, \*STDOUT, \*STDERR, \%ENV,
		$socket);

	while ($request->Accept() >= 0) {
		my $host = $ENV{HTTP_HOST} // '(none)';

		print <<EOF;
Content-Type: text/plain

host:$host:
EOF
	}

	FCGI::CloseSocket($socket);
}

###############################################################################
