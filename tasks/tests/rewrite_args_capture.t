#!/usr/bin/perl

# Written for nginx-eval in the style of nginx-tests.

# Tests for rewrite module, captures of a rewrite whose replacement has
# arguments, used afterwards by "set" and "if".  Memory errors are looked
# for with AddressSanitizer: the task builds nginx with it.

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

        location /set/ {
            rewrite ^/set/(.*) /new?c=1;
            set $v $1;
            return 200 "value:$v:";
        }

        location /if/ {
            rewrite ^/if/(.*) /new?c=1;
            if ($http_x_value = "$1") {
                return 200 "equal";
            }
            return 200 "not equal";
        }

        location /plain/ {
            rewrite ^/plain/(.*) /new;
            set $v $1;
            return 200 "value:$v:";
        }
    }
}

EOF

$t->run();

###############################################################################

# a capture is the decoded URI, whatever the replacement

like(http_get('/set/a%20b&c=d'), qr/value:a b&c=d:$/, 'set after rewrite with args');
like(http_get('/set/' . '%22' x 50), qr/value:${\('"' x 50)}:$/,
	'set after rewrite with args, long');
like(get('/if/a%20b&c=d', 'a b&c=d'), qr/\x0d\x0aequal$/,
	'if after rewrite with args');
like(get('/if/' . '%22' x 50, '"' x 50), qr/\x0d\x0aequal$/,
	'if after rewrite with args, long');

like(http_get('/plain/a%20b&c=d'), qr/value:a b&c=d:$/, 'set after rewrite');
like(http_get('/set/abc'), qr/value:abc:$/, 'set after rewrite with args, plain');

###############################################################################

sub get {
	my ($uri, $value) = @_;
	return http(<<EOF);
GET $uri HTTP/1.0
Host: localhost
X-Value: $value

EOF
}

###############################################################################
