#!/usr/bin/perl
# The sandbox self-test's test file (agent/selftest.py): a client as nginx-tests' own, Perl's
# IO::Socket, reaches the server the phase started on the sandbox's loopback.
use strict;
use warnings;
use IO::Socket::INET;
use Test::More tests => 2;

my $port = $ENV{SELFTEST_PORT} or BAIL_OUT('SELFTEST_PORT is not set');
my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Timeout => 10);
ok($s, 'connected to the server on 127.0.0.1') or diag("connect: $@");
my $reply = '';
if ($s) {
    print $s "GET / HTTP/1.0\r\nHost: localhost\r\n\r\n";
    local $/;
    $reply = <$s> // '';
}
like($reply, qr/nginx-eval self-test/, 'the server answered');
