#!/usr/bin/perl

# Written for nginx-eval in the style of nginx-tests.

# Tests for IMAP AUTHENTICATE CRAM-MD5 attempted again after a failed one, in
# the same session.

###############################################################################

use warnings;
use strict;

use Test::More;

use MIME::Base64;

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
        imap_auth  plain cram-md5;
    }
}

http {
    %%TEST_GLOBALS_HTTP%%

    server {
        listen       127.0.0.1:8080;
        server_name  localhost;

        location = /mail/auth {
            set $reply "invalid login";
            set $passw "";

            set $userpass "$http_auth_user:$http_auth_pass";
            if ($userpass = 'test@example.com:secret') {
                set $reply OK;
            }

            set $userpass "$http_auth_user:$http_auth_salt:$http_auth_pass";
            if ($userpass ~ '^test@example.com:<.*@.*>:0{32}$') {
                set $reply OK;
                set $passw secret;
            }

            add_header Auth-Status $reply;
            add_header Auth-Server 127.0.0.1;
            add_header Auth-Port %%PORT_8144%%;
            add_header Auth-Pass $passw;
            add_header Auth-Wait 1;
            return 204;
        }
    }
}

EOF

$t->run_daemon(\&Test::Nginx::IMAP::imap_test_daemon);
$t->run()->plan(7);

$t->waitforsocket('127.0.0.1:' . port(8144));

###############################################################################

my $s = Test::Nginx::IMAP->new();
$s->read();

# a failed attempt, then a response that is no valid CRAM-MD5 response

$s->send('1 AUTHENTICATE CRAM-MD5');
$s->check(qr/^\+ /, 'challenge');
$s->send(encode_base64('test@example.com ' . ('1' x 32), ''));
$s->check(qr/^1 NO/, 'wrong digest');

$s->send('2 AUTHENTICATE CRAM-MD5');
$s->check(qr/^\+ /, 'challenge again');
$s->send(encode_base64('test@example.com', ''));
like($s->read() // '', qr/^2 (BAD|NO)/, 'no digest after a failed attempt');

# the session goes on: a good digest logs in

$s->send('3 AUTHENTICATE CRAM-MD5');
$s->check(qr/^\+ /, 'challenge once more');
$s->send(encode_base64('test@example.com ' . ('0' x 32), ''));
$s->ok('good digest after a failed attempt');

# the same without a failed attempt before

$s = Test::Nginx::IMAP->new();
$s->read();

$s->send('1 AUTHENTICATE CRAM-MD5');
$s->read();
$s->send(encode_base64('test@example.com', ''));
like($s->read() // '', qr/^1 (BAD|NO)/, 'no digest');

###############################################################################
