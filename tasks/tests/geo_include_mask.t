#!/usr/bin/perl

# Written for nginx-eval in the style of nginx-tests.

# Tests for the "include" directive with a file name mask inside a "geo"
# block: the configuration is loaded by a reload, so that nginx runs whether
# it accepts the mask or not.

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

my $t = Test::Nginx->new()->has(qw/http geo/)->plan(5);

$t->write_file_expand('nginx.conf', conf(1, 'default none;'));
$t->write_file('geo-a.conf', "10.0.0.0/8 ten;\n");
$t->write_file('geo-b.conf', "192.0.2.0/24 test;\n");
$t->write_file('single.conf', "10.0.0.0/8 single;\n");
$t->run();

###############################################################################

like(http_get('/?ip=10.1.2.3'), qr/gen:1 geo:none single:none$/, 'before reload');

$t->write_file_expand('nginx.conf', conf(2, 'include geo-*.conf;'));
$t->reload();

ok(generation(2), 'reloaded with a mask');

like(http_get('/?ip=10.1.2.3'), qr/geo:ten /, 'first file of the mask');
like(http_get('/?ip=192.0.2.1'), qr/geo:test /, 'second file of the mask');
like(http_get('/?ip=10.1.2.3'), qr/single:single$/, 'single file');

###############################################################################

sub conf {
	my ($gen, $include) = @_;
	return <<"EOF";

%%TEST_GLOBALS%%

daemon off;

events {
}

http {
    %%TEST_GLOBALS_HTTP%%

    geo \$arg_ip \$geo {
        default  none;
        $include
    }

    geo \$arg_ip \$single {
        default  none;
        ${\ ($gen == 1 ? '' : 'include single.conf;') }
    }

    server {
        listen       127.0.0.1:8080;
        server_name  localhost;

        location / {
            return 200 "gen:$gen geo:\$geo single:\$single";
        }
    }
}

EOF
}

# a reload that nginx refuses leaves the first configuration running

sub generation {
	my ($gen) = @_;
	for (1 .. 50) {
		return 1 if http_get('/') =~ /gen:$gen /;
		select undef, undef, undef, 0.1;
	}
	return 0;
}

###############################################################################
