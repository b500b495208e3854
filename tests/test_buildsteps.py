"""Build steps (nginx_eval/build/steps.py): the one-line reason a failed build gives."""

from nginx_eval.build.steps import first_error

# From a real build of nginx 1.9.x (2015) against OpenSSL 3.0 without -Wno-deprecated-declarations:
# configure's summary, then make. Trimmed to the lines that matter.
OLD_BASE_LOG = """\
  nginx pid file: "/usr/local/nginx/logs/nginx.pid"
  nginx error log file: "/usr/local/nginx/logs/error.log"
  nginx http access log file: "/usr/local/nginx/logs/access.log"
$ make -j2
make -f objs/Makefile
\tsrc/core/ngx_crypt.c
src/core/ngx_crypt.c: In function 'ngx_crypt_apr1':
src/core/ngx_crypt.c:82:5: error: 'MD5_Init' is deprecated: Since OpenSSL 3.0 \
[-Werror=deprecated-declarations]
src/core/ngx_crypt.c:83:5: error: 'MD5_Update' is deprecated: Since OpenSSL 3.0 \
[-Werror=deprecated-declarations]
make[1]: *** [objs/Makefile:560: objs/src/core/ngx_crypt.o] Error 1
make: *** [Makefile:8: build] Error 2
"""


def test_the_compiler_diagnostic_is_the_reason_not_configure_summary():
    assert first_error(OLD_BASE_LOG) == (
        "src/core/ngx_crypt.c:82:5: error: 'MD5_Init' is deprecated: Since OpenSSL 3.0 "
        "[-Werror=deprecated-declarations]"
    )


def test_configure_errors_and_make_errors():
    assert (
        first_error(
            'checking for OS\n./auto/configure: error: invalid option "--with-http_v2_module"\n'
        )
        == './auto/configure: error: invalid option "--with-http_v2_module"'
    )
    assert (
        first_error("nginx error log file: x\nmake: *** [Makefile:8: build] Error 2\n")
        == "make: *** [Makefile:8: build] Error 2"
    )
    assert first_error("all fine\n") == ""
