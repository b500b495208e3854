#!/usr/bin/perl

# Written for nginx-eval in the style of nginx-tests.

# Tests for proxy_set_header with a value whose variables change each other
# while the request to the upstream is made: a named capture set by a map's
# regular expression.  Memory errors are looked for with AddressSanitizer:
# the task builds nginx with it.

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

# nginx workers exit without freeing memory that is still reachable at exit
# time: not what this file looks for

$ENV{ASAN_OPTIONS} = join ':', 'detect_leaks=0', $ENV{ASAN_OPTIONS} || ();

my $t = Test::Nginx->new()->has(qw/http proxy rewrite map/)->plan(4)
	->write_file_expand('nginx.conf', <<'EOF');

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    map $uri $map {
        ~(?<capture>.*)  $capture;
    }

    server {
        listen       127.0.0.1:8080;
        server_name  localhost;

        location /map/ {
            set $capture "";
            proxy_set_header X-Value "$capture $map";
            proxy_pass http://127.0.0.1:8080/echo;
        }

        location /plain/ {
            proxy_set_header X-Value "$uri $map";
            proxy_pass http://127.0.0.1:8080/echo;
        }

        location /echo {
            return 200 "[$http_x_value]";
        }
    }
}

EOF

$t->run();

###############################################################################

my $long = 'x' x 200;

# whatever the header turns out to be, each request gets a response

like(http_get("/map/$long"), qr!^HTTP/1\.1 \d\d\d !, 'capture set by map');
like(http_get("/map/$long"), qr!^HTTP/1\.1 \d\d\d !, 'capture set by map again');
like(http_get("/map/$long"), qr!^HTTP/1\.1 \d\d\d !, 'capture set by map, third');

like(http_get("/plain/$long"), qr!\[/plain/$long /plain/$long\]$!, 'plain value');

###############################################################################
