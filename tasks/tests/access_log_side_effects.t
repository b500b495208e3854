#!/usr/bin/perl

# Written for nginx-eval in the style of nginx-tests.

# Tests for access_log with a format whose variables change each other while
# the line is written: a named capture set by a map's regular expression.
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

my $t = Test::Nginx->new()->has(qw/http rewrite map/)->plan(4)
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

    log_format  side  "$capture $map";
    log_format  plain "$uri";

    server {
        listen       127.0.0.1:8080;
        server_name  localhost;

        location /map/ {
            set $capture "";
            access_log %%TESTDIR%%/side.log side;
            return 200 "logged";
        }

        location /plain/ {
            access_log %%TESTDIR%%/plain.log plain;
            return 200 "logged";
        }
    }
}

EOF

$t->run();

###############################################################################

my $long = 'x' x 200;

# the response is sent before the line is logged: a second request on the
# same connection shows whether the worker went on

is(two("/map/$long"), 2, 'two requests on a connection');
is(two("/map/$long"), 2, 'two requests on a connection again');
is(two("/plain/$long"), 2, 'two requests on a connection, plain');

$t->stop();

like($t->read_file('plain.log'), qr!^/plain/$long$!m, 'log plain');

###############################################################################

sub two {
	my ($uri) = @_;
	my $r = http(<<EOF);
GET $uri HTTP/1.1
Host: localhost

GET $uri HTTP/1.1
Host: localhost
Connection: close

EOF
	return scalar(() = $r =~ /logged/g);
}

###############################################################################
