#!/usr/bin/perl

# Written for nginx-eval in the style of nginx-tests.

# Tests for proxy_pass with a URI, when try_files changes the request URI to
# one shorter than the location prefix.

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

my $t = Test::Nginx->new()->has(qw/http proxy/)->plan(4)
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

        location /1234 {
            try_files /123 =404;
            proxy_pass http://127.0.0.1:8081/;
        }

        location /abcdef/ {
            try_files /abc =404;
            proxy_pass http://127.0.0.1:8081/backend/;
        }

        location /longer/ {
            try_files /longer/file =404;
            proxy_pass http://127.0.0.1:8081/backend/;
        }
    }

    server {
        listen       127.0.0.1:8081;
        server_name  localhost;

        location / {
            return 200 "uri:$request_uri";
        }
    }
}

EOF

$t->write_file('123', '');
$t->write_file('abc', '');
mkdir($t->testdir() . '/longer');
$t->write_file('longer/file', '');
$t->run();

###############################################################################

# the request reaches the backend, whatever URI it is given there

like(http_get('/1234'), qr!^HTTP/1\.1 200 .*uri:/!s, 'uri shorter than location');
like(http_get('/12345'), qr!^HTTP/1\.1 200 .*uri:/!s,
	'uri shorter than location, longer request');
like(http_get('/abcdef/x'), qr!^HTTP/1\.1 200 .*uri:/!s,
	'uri shorter than location, replacement uri');

like(http_get('/longer/x'), qr!uri:/backend/file$!, 'uri longer than location');

###############################################################################
