#!/usr/bin/perl

# Written for nginx-eval in the style of nginx-tests.

# Tests for rewrite module, a replacement with nested (overlapping) captures
# of a URI that needs escaping, with the "redirect" flag and with arguments.
# Memory errors are looked for with AddressSanitizer: the task builds nginx
# with it.

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

my $t = Test::Nginx->new()->has(qw/http rewrite/)->plan(6)
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

        location /redirect/ {
            rewrite ^/redirect/((.*))$ http://example.com/$1$2 redirect;
            return 200 "not rewritten";
        }

        location /args/ {
            rewrite ^/args/((.*))$ http://example.com/?$1$2;
            return 200 "not rewritten";
        }
    }
}

EOF

$t->run();

###############################################################################

my $plus = '+' x 30;

my $r = http_get("/redirect/$plus");
like($r, qr!^HTTP/1\.1 302 !, 'redirect');
like($r, qr!^Location: http://example\.com/((%2B|\+){60})\x0d?$!mi,
	'redirect location');

$r = http_get("/args/$plus");
like($r, qr!^HTTP/1\.1 302 !, 'arguments');
like($r, qr!^Location: http://example\.com/\?((%2B|\+){60})\x0d?$!mi,
	'arguments location');

# the same with a URI that needs no escaping

like(http_get('/redirect/abc'), qr!^Location: http://example\.com/abcabc\x0d?$!mi,
	'redirect plain');
like(http_get('/args/abc'), qr!^Location: http://example\.com/\?abcabc\x0d?$!mi,
	'arguments plain');

###############################################################################
