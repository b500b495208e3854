#!/usr/bin/perl

# Written for nginx-eval in the style of nginx-tests.

# Tests for complex values whose variables change captures while they are
# evaluated: a map with a regular expression evaluated after $1 in the same
# value, in "return" and in "set".

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

my $t = Test::Nginx->new()->has(qw/http rewrite map/)->plan(4)
	->write_file_expand('nginx.conf', <<'EOF');

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    map $uri $digit {
        ~^/\w+/(?<first>[0-9]).*$  $first;
    }

    server {
        listen       127.0.0.1:8080;
        server_name  localhost;

        location ~ ^/return/([0-9]*)[a-z]*$ {
            return 200 "[$1:$digit]";
        }

        location ~ ^/set/([0-9]*)[a-z]*$ {
            set $v "[$1:$digit]";
            return 200 $v;
        }
    }
}

EOF

$t->run();

###############################################################################

# $1 may be the location's capture or, once the map has matched, the map's:
# either way, the value is the text of the two variables and nothing else

like(http_get('/return/1234abcd'), qr/\x0d\x0a\x0d\x0a\[(1234|1):1\]\z/s, 'return');
like(http_get('/set/1234abcd'), qr/\x0d\x0a\x0d\x0a\[(1234|1):1\]\z/s, 'set');

like(http_get('/return/5'), qr/\x0d\x0a\x0d\x0a\[5:5\]\z/s, 'return same length');
like(http_get('/set/5'), qr/\x0d\x0a\x0d\x0a\[5:5\]\z/s, 'set same length');

###############################################################################
