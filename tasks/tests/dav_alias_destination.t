#!/usr/bin/perl

# Written for nginx-eval in the style of nginx-tests.

# Tests for dav COPY and MOVE in a location with alias, when the destination
# is shorter than the location.  Memory errors are looked for with
# AddressSanitizer: the task builds nginx with it.

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

my $t = Test::Nginx->new()->has(qw/http dav/)->plan(8)
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

        absolute_redirect off;

        location /webdav/ {
            alias %%TESTDIR%%/files/;
            dav_methods PUT DELETE MKCOL COPY MOVE;
        }
    }
}

EOF

mkdir($t->testdir() . '/files');
$t->write_file('files/file', '0123456789');
$t->run();

###############################################################################

my $d = $t->testdir();
my $r;

# a destination outside the location is not served by it: refused,
# and nothing is written anywhere

$r = copy_move('COPY', '/webdav/file', '/x');
like($r, qr!^HTTP/1\.1 4\d\d !, 'copy to a short destination');

$r = copy_move('MOVE', '/webdav/file', '/x');
like($r, qr!^HTTP/1\.1 4\d\d !, 'move to a short destination');

$r = copy_move('COPY', '/webdav/file', 'http://localhost/ab');
like($r, qr!^HTTP/1\.1 4\d\d !, 'copy to a short absolute destination');

is(-s "$d/files/file", 10, 'source kept');
ok(!-e "$d/x" && !-e "$d/ab" && !-e "$d/files/x", 'nothing written');

# destinations in the location

like(copy_move('COPY', '/webdav/file', '/webdav/copy'), qr!^HTTP/1\.1 201 !,
	'copy in the location');
like(copy_move('MOVE', '/webdav/copy', '/webdav/moved'), qr!^HTTP/1\.1 201 !,
	'move in the location');
is(-s "$d/files/moved", 10, 'moved file');

###############################################################################

sub copy_move {
	my ($method, $uri, $destination) = @_;
	return http(<<EOF);
$method $uri HTTP/1.1
Host: localhost
Destination: $destination
Connection: close

EOF
}

###############################################################################
