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

my $gen = generation($t, 2);
is($gen, 2, 'reloaded with a mask');

# every answer says the generation of the configuration that made it: the
# assertions below hold only for answers of the new one

like(get($gen, '/?ip=10.1.2.3'), qr/gen:2 geo:ten /, 'first file of the mask');
like(get($gen, '/?ip=192.0.2.1'), qr/gen:2 geo:test /, 'second file of the mask');
like(get($gen, '/?ip=10.1.2.3'), qr/gen:2 .*single:single$/, 'single file');

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

# A reload is asynchronous: the master reads the configuration and starts new
# workers, and a worker of the old one answers until it has seen the signal
# to quit, which on a busy machine may come well after the first answer of
# the new one.  A reload that nginx refuses leaves the first configuration
# running and logs an "emerg" line: no need to wait for it then.  The
# generation that runs now: $gen once it answers, else the first.

sub generation {
	my ($t, $gen) = @_;
	my $deadline = time() + 30;
	while (time() < $deadline) {
		return $gen if http_get('/') =~ /gen:$gen /;
		last if $t->read_file('error.log') =~ /\[emerg\]/;
		select undef, undef, undef, 0.1;
	}
	return 1;
}

# an answer of generation $gen, asked until one comes

sub get {
	my ($gen, $uri) = @_;
	my $deadline = time() + 30;
	my $r = http_get($uri);
	while ($r !~ /gen:$gen / && time() < $deadline) {
		select undef, undef, undef, 0.1;
		$r = http_get($uri);
	}
	return $r;
}

###############################################################################
