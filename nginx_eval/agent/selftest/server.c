/* The sandbox self-test's server (agent/selftest.py): what an agent's own nginx does, in
 * small. It makes a private temporary directory as nginx makes its *_temp paths, listens on a
 * free port of 127.0.0.1, prints the port, and answers every connection with one HTTP
 * response, until it is killed. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static const char answer[] =
    "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 21\r\n\r\n"
    "nginx-eval self-test\n";

int main(void)
{
    struct sockaddr_in addr;
    socklen_t len = sizeof(addr);
    char request[4096];
    FILE *temp;
    int listener, client;

    if (mkdir("client_body_temp", 0700) != 0
        || (temp = fopen("client_body_temp/0000000001", "w")) == NULL
        || fputs("body\n", temp) == EOF || fclose(temp) != 0) {
        perror("server: client_body_temp");
        return 1;
    }
    listener = socket(AF_INET, SOCK_STREAM, 0);
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (listener < 0 || bind(listener, (struct sockaddr *) &addr, sizeof(addr)) != 0
        || listen(listener, 16) != 0
        || getsockname(listener, (struct sockaddr *) &addr, &len) != 0) {
        perror("server: listen");
        return 1;
    }
    printf("%d\n", ntohs(addr.sin_port));
    fflush(stdout);
    for (;;) {
        client = accept(listener, NULL, NULL);
        if (client < 0) {
            continue;
        }
        if (read(client, request, sizeof(request)) > 0) {
            (void) write(client, answer, sizeof(answer) - 1);
        }
        close(client);
    }
}
