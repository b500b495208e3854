#!/usr/bin/perl

# Written for nginx-eval in the style of nginx-tests.

# Tests for "set" with a value whose variables change each other while the
# value is evaluated: a named capture set by a map's regular expression, and
# a volatile map.  Memory errors are looked for with AddressSanitizer: the
# task builds nginx with it.

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

my $t = Test::Nginx->new()->has(qw/http rewrite map/)->plan(5)
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

    map prefix:$capture $volatile {
        volatile;
        ~(?<capture>.*)  $capture;
    }

    server {
        listen       127.0.0.1:8080;
        server_name  localhost;

        location /map/ {
            set $capture "";
            set $v "$capture $map";
            return 200 "[$v]";
        }

        location /volatile/ {
            set $capture "";
            set $v "$volatile";
            return 200 "[$v]";
        }

        location /plain/ {
            set $v "$uri $map";
            return 200 "[$v]";
        }
    }
}

EOF

$t->run();

###############################################################################

# whatever the value turns out to be, each request gets a response

my $long = 'x' x 200;

like(http_get("/map/$long"), qr!^HTTP/1\.1 \d\d\d !, 'capture set by map');
like(http_get("/volatile/$long"), qr!^HTTP/1\.1 \d\d\d !, 'volatile map');
like(http_get("/map/$long"), qr!^HTTP/1\.1 \d\d\d !, 'capture set by map again');
like(http_get("/volatile/$long"), qr!^HTTP/1\.1 \d\d\d !, 'volatile map again');

like(http_get("/plain/$long"), qr!\[/plain/$long /plain/$long\]$!, 'plain value');

###############################################################################
