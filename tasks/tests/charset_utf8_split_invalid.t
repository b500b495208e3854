#!/usr/bin/perl

# Written for nginx-eval in the style of nginx-tests.

# Tests for charset filter, recoding from UTF-8 when an invalid sequence
# arrives split over several buffers (here, pieces of the document that
# sub_filter leaves between the markers it removes).

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

# a four-byte lead followed by ASCII: invalid UTF-8, split so that three
# of its bytes end one piece of the document

$t->write_file('lead3.html', "x\xF0AB#Cz");
$t->write_file('lead3-1.html', "x\xF0AB#C#z");
$t->write_file('lead2.html', "x\xF0A#BCz");
$t->write_file('valid.html', "x\xF0\x9F#\x98\x80z");

$t->run();

###############################################################################

# the markers are removed: whatever an invalid sequence becomes,
# no byte of the file outside the text around it may appear

my $b = body('/lead3.html');
like($b, qr/^x[^#]*Cz\z/s, 'invalid sequence split 3+1') or diag(unpack 'H*', $b);

$b = body('/lead3-1.html');
like($b, qr/^x[^#]*Cz\z/s, 'invalid sequence split 3+1+1') or diag(unpack 'H*', $b);

$b = body('/lead2.html');
like($b, qr/^x[^#]*Cz\z/s, 'invalid sequence split 2+2') or diag(unpack 'H*', $b);

is(body('/valid.html'), 'x&#128512;z', 'valid sequence split 2+2');

###############################################################################

sub body {
	my ($uri) = @_;
	my $r = http_get($uri);
	return $1 if $r =~ /^HTTP\/1\.[01] 200 .*?\x0d\x0a\x0d\x0a(.*)\z/s;
	return "no 200 response: $r";
}

###############################################################################
