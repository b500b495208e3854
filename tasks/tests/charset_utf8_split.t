#!/usr/bin/perl

# Written for nginx-eval in the style of nginx-tests.

# Tests for charset filter, recoding from UTF-8 when a character arrives
# split over several buffers (here, pieces of the document that sub_filter
# leaves between the markers it removes).

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

my $t = Test::Nginx->new()->has(qw/http charset sub/)->plan(4)
	->write_file_expand('nginx.conf', <<'EOF');

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    charset_map windows-1251 utf-8 {
        88 E282AC; # EURO SIGN
    }

    server {
        listen       127.0.0.1:8080;
        server_name  localhost;

        location / {
            charset windows-1251;
            source_charset utf-8;

            sub_filter '#' '';
            sub_filter_once off;
        }
    }
}

EOF

# the same text with and without markers: with sub_filter removing the
# markers, both must be recoded to the same bytes

$t->write_file('euro.html', "a\xE2\x82\xACz");
$t->write_file('euro-2-1.html', "a\xE2\x82#\xAC#z");
$t->write_file('euro-1-1-1.html', "a\xE2#\x82#\xAC#z");

$t->write_file('smile.html', "a\xF0\x9F\x98\x80z");
$t->write_file('smile-2-1-1.html', "a\xF0\x9F#\x98#\x80#z");

$t->run();

###############################################################################

my $euro = body('/euro.html');
is(body('/euro-2-1.html'), $euro, 'euro sign split 2+1');
is(body('/euro-1-1-1.html'), $euro, 'euro sign split 1+1+1');

my $smile = body('/smile.html');
is(body('/smile-2-1-1.html'), $smile, 'four-byte character split 2+1+1');

is($euro, "a\x88z", 'euro sign unsplit');

###############################################################################

sub body {
	my ($uri) = @_;
	my $r = http_get($uri);
	return $1 if $r =~ /^HTTP\/1\.[01] 200 .*?\x0d\x0a\x0d\x0a(.*)\z/s;
	return "no 200 response: $r";
}

###############################################################################
