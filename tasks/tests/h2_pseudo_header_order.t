#!/usr/bin/perl

# Written for nginx-eval in the style of nginx-tests.

# Tests for HTTP/2 requests with a pseudo-header field after a regular header
# field, which makes a request malformed (RFC 9113, 8.3).

###############################################################################

use warnings;
use strict;

use Test::More;

BEGIN { use FindBin; chdir($FindBin::Bin); }

use lib 'lib';
use Test::Nginx;
use Test::Nginx::HTTP2;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

my $t = Test::Nginx->new()->has(qw/http http_v2/)->plan(6)
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

        http2 on;

        location / {
            return 200 "path:$request_uri";
        }
    }
}

EOF

$t->run();

###############################################################################

# a malformed request is refused: a client error, or the stream reset

my $refused = qr/^(4\d\d|RST_STREAM|GOAWAY)$/;

is(answer(qw/:method :scheme :path :authority x-foo/), 200, 'in order');
is(answer(qw/:path :authority :method :scheme x-foo/), 200,
	'pseudo-headers in another order');

like(answer(qw/:method :scheme :authority x-foo :path/), $refused,
	'path after a header');
like(answer(qw/:method :scheme :path x-foo :authority/), $refused,
	'authority after a header');
like(answer(qw/x-foo :method :scheme :path :authority/), $refused,
	'a header first');
like(answer(qw/:method :path :authority x-foo :scheme/), $refused,
	'scheme after a header');

###############################################################################

# the status of the response to a GET request with its fields in the order
# given, else the type of the frame that ended the stream

sub answer {
	my (@order) = @_;
	my %value = (':method' => 'GET', ':scheme' => 'http', ':path' => '/',
		':authority' => 'localhost', 'x-foo' => 'bar');

	my $s = Test::Nginx::HTTP2->new();
	my $sid = $s->new_stream({ headers => [
		map { { name => $_, value => $value{$_}, mode => 2 } } @order
	]});
	my $frames = $s->read(all => [{ sid => $sid, fin => 1 }]);

	my ($frame) = grep { $_->{type} =~ /HEADERS|RST_STREAM|GOAWAY/ }
		@$frames;
	return 'none' unless $frame;
	return $frame->{headers}{':status'} if $frame->{type} eq 'HEADERS';
	return $frame->{type};
}

###############################################################################
