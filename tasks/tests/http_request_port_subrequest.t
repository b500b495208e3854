#!/usr/bin/perl

# Written for nginx-eval in the style of nginx-tests.

# Tests for $request_port and $is_request_port variables in subrequests:
# SSI includes and auth_request.

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

my $t = Test::Nginx->new()->has(qw/http ssi auth_request/)->plan(5)
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

        location ~ \.html$ {
            ssi on;
        }

        location /port {
            return 200 "port:$is_request_port$request_port:";
        }

        location = /auth {
            auth_request /check;
            auth_request_set $checked "port:$is_request_port$request_port:";
            add_header X-Checked $checked;
        }

        location /check {
            return 204;
        }
    }
}

EOF

# the variables are evaluated in the subrequest first: they are cached
# once evaluated, and a subrequest shares them with its main request

$t->write_file('ssi.html', 'included <!--# include virtual="/port" -->');
$t->write_file('main.html', 'main <!--# echo var="is_request_port" -->'
	. '<!--# echo var="request_port" -->');
$t->write_file('auth', 'checked');

$t->run();

###############################################################################

like(get('/main.html', 'localhost:8080'), qr/main :8080$/, 'main request');

like(get('/ssi.html', 'localhost:8080'), qr/included port::8080:$/, 'ssi include');
like(get('/ssi.html', 'localhost'), qr/included port::$/, 'ssi include, no port');

like(get('/auth', 'localhost:8080'), qr/^X-Checked: port::8080:\x0d?$/m,
	'auth request');
like(get('/auth', 'localhost'), qr/^X-Checked: port::\x0d?$/m,
	'auth request, no port');

###############################################################################

sub get {
	my ($uri, $host) = @_;
	http(<<EOF);
GET $uri HTTP/1.0
Host: $host

EOF
}

###############################################################################
