#!/usr/bin/perl

# Written for nginx-eval in the style of nginx-tests.

# Tests for HTTP/2 requests with more than one TE header field: a request
# whose TE holds anything but "trailers" is malformed (RFC 9113, 8.2.2).

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

my $t = Test::Nginx->new()->has(qw/http http_v2/)->plan(5)
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
            return 200 "body";
        }
    }
}

EOF

$t->run();

###############################################################################

# a malformed request is refused: a client error, or the stream reset

my $refused = qr/^(4\d\d|RST_STREAM|GOAWAY)$/;

is(answer([te => 'trailers']), 200, 'te trailers');
like(answer([te => 'gzip']), $refused, 'te gzip');

like(answer([te => 'trailers'], [te => 'gzip']), $refused,
	'te trailers, then te gzip');
like(answer([te => 'trailers'], [te => 'deflate'], [te => 'trailers']),
	$refused, 'te deflate between te trailers');
like(answer([te => 'trailers'], ['x-foo' => 'bar'], [te => 'chunked']),
	$refused, 'te chunked after another header');

###############################################################################

# the status of the response to a GET request with extra header fields,
# else the type of the frame that ended the stream

sub answer {
	my (@extra) = @_;

	my $s = Test::Nginx::HTTP2->new();
	my $sid = $s->new_stream({ headers => [
		{ name => ':method', value => 'GET', mode => 0 },
		{ name => ':scheme', value => 'http', mode => 0 },
		{ name => ':path', value => '/', mode => 0 },
		{ name => ':authority', value => 'localhost', mode => 1 },
		map { { name => $_->[0], value => $_->[1], mode => 2 } } @extra
	]});
	my $frames = $s->read(all => [{ sid => $sid, fin => 1 }]);

	my ($frame) = grep { $_->{type} =~ /HEADERS|RST_STREAM|GOAWAY/ }
		@$frames;
	return 'none' unless $frame;
	return $frame->{headers}{':status'} if $frame->{type} eq 'HEADERS';
	return $frame->{type};
}

###############################################################################
