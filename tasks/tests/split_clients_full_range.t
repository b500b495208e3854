#!/usr/bin/perl

# Written for nginx-eval in the style of nginx-tests.

# Tests for split_clients whose percentages add up to 100%: every key gets
# a variant, keys at the top of the hash range too.

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

# a hundred variants of 1% each, and the same with "*" for the last one

my $percents = join "\n", map { "        1%  b$_;" } 1 .. 100;
(my $star = $percents) =~ s/1%  b100;/*   b100;/;

my $t = Test::Nginx->new()->has(qw/http split_clients/)->plan(5)
	->write_file_expand('nginx.conf', <<"EOF");

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    split_clients \$arg_k \$percents {
$percents
    }

    split_clients \$arg_k \$star {
$star
    }

    server {
        listen       127.0.0.1:8080;
        server_name  localhost;

        location / {
            return 200 "percents:\$percents star:\$star";
        }
    }
}

EOF

$t->run();

###############################################################################

# MurmurHash2 of "client91807171" is 4294967231, that of "client390485522"
# 4294967283: both in the last hundred values of the 32-bit range, where
# "*" gives the last variant; that of "client5" is 1020026574

like(http_get('/?k=client5'), qr/percents:b24 star:b24$/, 'key in the range');

like(http_get('/?k=client91807171'), qr/percents:b100 /, 'key at the top');
like(http_get('/?k=client91807171'), qr/star:b100$/, 'key at the top, star');
like(http_get('/?k=client390485522'), qr/percents:b100 /, 'another key at the top');
like(http_get('/?k=client390485522'), qr/star:b100$/,
	'another key at the top, star');

###############################################################################
