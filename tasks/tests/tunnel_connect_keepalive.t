#!/usr/bin/perl

# Written for nginx-eval in the style of nginx-tests.

# Tests for http tunnel module, what follows a CONNECT request that did not
# establish a tunnel on the same connection.

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

my $t = Test::Nginx->new()->has(qw/http tunnel rewrite access/)->plan(6)
	->write_file_expand('nginx.conf', <<'EOF');

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    tunnel_connect_timeout 1s;

    server {
        listen       127.0.0.1:8080;
        server_name  localhost;

        location / {
            if ($request_method = CONNECT) {
                tunnel_pass;
                break;
            }
            return 200 "SECRET";
        }
    }

    server {
        listen       127.0.0.1:8081;
        server_name  localhost;

        location / {
            deny all;

            if ($request_method = CONNECT) {
                tunnel_pass;
                break;
            }
            return 200 "SECRET";
        }
    }

    server {
        listen       127.0.0.1:8082;
        server_name  localhost;

        location / {
            return 200 "TARGET";
        }
    }
}

EOF

$t->run();

###############################################################################

my $closed = '127.0.0.1:' . port(8083);
my $target = '127.0.0.1:' . port(8082);

# after a CONNECT request that failed, the bytes that follow it on the
# connection are not taken for another request

my $r = connect_then_get(8080, $closed);
like($r, qr/^HTTP\/1\.1 502 /, 'failed connect');
unlike($r, qr/SECRET/, 'failed connect, no request after it');

$r = connect_then_get(8081, $target);
like($r, qr/^HTTP\/1\.1 403 /, 'denied connect');
unlike($r, qr/SECRET/, 'denied connect, no request after it');

$r = connect_then_get(8081, $target, 'Connection: keep-alive');
unlike($r, qr/SECRET/, 'denied connect with keep-alive, no request after it');

# a GET request keeps the connection as always

like(get_then_get(8080), qr/SECRET.*SECRET/s, 'keepalive after get');

###############################################################################

sub connect_then_get {
	my ($port, $host, $header) = @_;
	$header = $header ? "$header\n" : '';
	return http(<<EOF, socket => sock($port));
CONNECT $host HTTP/1.1
Host: $host
${header}
GET / HTTP/1.1
Host: localhost
Connection: close

EOF
}

sub get_then_get {
	my ($port) = @_;
	return http(<<EOF, socket => sock($port));
GET / HTTP/1.1
Host: localhost

GET / HTTP/1.1
Host: localhost
Connection: close

EOF
}

sub sock {
	my ($port) = @_;
	return IO::Socket::INET->new(
		Proto => 'tcp',
		PeerAddr => '127.0.0.1:' . port($port),
	)
		or die "Can't connect to nginx: $!\n";
}

###############################################################################
