#!/usr/bin/perl

# Written for nginx-eval in the style of nginx-tests.

# Tests for IMAP literals whose length does not fit in a machine word.

###############################################################################

use warnings;
use strict;

use Test::More;

use Socket qw/ CRLF /;

BEGIN { use FindBin; chdir($FindBin::Bin); }

use lib 'lib';
use Test::Nginx;
use Test::Nginx::IMAP;

###############################################################################

select STDERR; $| = 1;
select STDOUT; $| = 1;

local $SIG{PIPE} = 'IGNORE';

my $t = Test::Nginx->new()->has(qw/mail imap http rewrite/)
	->write_file_expand('nginx.conf', <<'EOF');

%%TEST_GLOBALS%%

daemon off;

events {
}

mail {
    proxy_pass_error_message  off;
    auth_http  http://127.0.0.1:8080/mail/auth;

    server {
        listen     127.0.0.1:8143;
        protocol   imap;
    }
}

http {
    %%TEST_GLOBALS_HTTP%%

    server {
        listen       127.0.0.1:8080;
        server_name  localhost;

        location = /mail/auth {
            set $reply ERROR;

            set $userpass "$http_auth_user:$http_auth_pass";
            if ($userpass = 'test@example.com:secret') {
                set $reply OK;
            }

            add_header Auth-Status $reply;
            add_header Auth-Server 127.0.0.1;
            add_header Auth-Port %%PORT_8144%%;
            add_header Auth-Wait 1;
            return 204;
        }
    }
}

EOF

$t->run_daemon(\&Test::Nginx::IMAP::imap_test_daemon);
$t->run()->plan(4);

$t->waitforsocket('127.0.0.1:' . port(8144));

###############################################################################

# a literal of 18 octets logs in, as usual

my $s = Test::Nginx::IMAP->new();
$s->read();

$s->send('a01 LOGIN {16+}' . CRLF . 'test@example.com' . ' {6+}' . CRLF . 'secret');
$s->ok('login with literals');

# 18446744073709551632 is 2^64 + 16: a length no client can send, whatever
# nginx makes of it, the 16 octets that follow are not the whole literal,
# and the login does not succeed

$s = Test::Nginx::IMAP->new();
$s->read();

$s->send('a01 LOGIN {18446744073709551632+}' . CRLF . 'test@example.com'
	. ' {6+}' . CRLF . 'secret');
unlike($s->read() // "", qr/^a01 OK/, 'literal length of 2^64 + 16');

$s = Test::Nginx::IMAP->new();
$s->read();

$s->send('a01 LOGIN test@example.com {18446744073709551622+}' . CRLF
	. 'secret');
unlike($s->read() // "", qr/^a01 OK/, 'literal length of 2^64 + 6');

$s = Test::Nginx::IMAP->new();
$s->read();

$s->send('a01 LOGIN test@example.com {99999999999999999999999999999999+}'
	. CRLF . 'secret');
unlike($s->read() // "", qr/^a01 OK/, 'literal length of 10^32 - 1');

###############################################################################
