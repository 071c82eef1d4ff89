/* The peers file: one `OWNER HOST:PORT [TRANSPORT]` line per owner (HOST a name, an IPv4
   address or a bracketed IPv6 address; TRANSPORT tcp, the default, shm or shm-only: what
   the owner may use with a peer on its host); blank lines and `#` comments are ignored, a
   line longer than 1022 characters or holding a NUL byte is refused.
   Every line is checked; only this owner's and its peers' hosts are resolved
   (getaddrinfo). Without a peers file the endpoints come from a node list (engine.c), each
   with TCP. */
#include "rt.h"

#include <ctype.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>

/* Split `HOST:PORT` or `[V6]:PORT`; 0 when well formed (PORT in 1..65535), else -1. */
int rt_parse_endpoint(const char *text, char *host, size_t host_size, int *port) {
    const char *colon, *h = text;
    size_t len;
    if (*text == '[') {
        const char *close = strchr(text, ']');
        if (!close || close[1] != ':') return -1;
        h = text + 1;
        len = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(text, ':');
        if (!colon) return -1;
        len = (size_t)(colon - text);
        if (memchr(text, ':', len)) return -1; /* an IPv6 address needs brackets */
    }
    if (len == 0 || len >= host_size) return -1;
    const char *p = colon + 1;
    long v = 0;
    if (!*p) return -1;
    for (; *p; p++) {
        if (!isdigit((unsigned char)*p) || v > 65535) return -1;
        v = v * 10 + (*p - '0');
    }
    if (v < 1 || v > 65535) return -1;
    memcpy(host, h, len);
    host[len] = 0;
    *port = (int)v;
    return 0;
}

static int bad_line(struct rt *rt, int64_t line) {
    return rt_fail(rt, RT_USAGE, "peers file '%s' line %lld: expected 'OWNER HOST:PORT [tcp|shm|shm-only]' with "
                   "OWNER in 0..%lld and PORT in 1..65535", rt->net.peers_path, (long long)line, (long long)(rt->n - 1));
}

/* The next whitespace-separated token of *p (NUL-terminated in place), or NULL. */
static char *token(char **p) {
    char *s = *p;
    while (isspace((unsigned char)*s)) s++;
    if (!*s) return NULL;
    char *e = s;
    while (*e && !isspace((unsigned char)*e)) e++;
    *p = *e ? e + 1 : e;
    *e = 0;
    return s;
}

/* The optional third column: what the owner may use (TRANSPORT_*), tcp without one. */
static int transport_of(const char *text) {
    static const char *const names[] = {"tcp", "shm", "shm-only"};
    if (!text) return TRANSPORT_TCP;
    for (int t = 0; t < 3; t++)
        if (strcmp(text, names[t]) == 0) return t;
    return -1;
}

/* One non-blank, non-comment line: `OWNER ENDPOINT [TRANSPORT]` and nothing else. */
static int parse_line(struct rt *rt, char *text, int64_t line) {
    char *p = text, *first = token(&p);
    int64_t owner;
    if (!first || !rt_decimal(first, &owner) || owner >= rt->n) return bad_line(rt, line);
    char *tok = token(&p), *mode = token(&p);
    int transport = transport_of(mode);
    if (!tok || transport < 0 || token(&p)) return bad_line(rt, line);
    struct endpoint *e = &rt->net.ep[owner];
    if (e->listed)
        return rt_fail(rt, RT_USAGE, "peers file '%s' line %lld: owner %lld is listed twice",
                       rt->net.peers_path, (long long)line, (long long)owner);
    if (rt_parse_endpoint(tok, e->host, sizeof e->host, &e->port) != 0) return bad_line(rt, line);
    e->listed = 1;
    e->line = line;
    e->transport = transport;
    return RT_OK;
}

/* Where an endpoint was given, for messages: its peers-file line, or its owner's host in
   the node list. */
static const char *origin(const struct rt *rt, const struct endpoint *e, char *buf, size_t size) {
    if (rt->net.peers_path)
        snprintf(buf, size, "peers file '%s' line %lld", rt->net.peers_path, (long long)e->line);
    else
        snprintf(buf, size, "%s, the host of owner %lld", rt->cli.nodes_from, (long long)e->line);
    return buf;
}

static int resolve(struct rt *rt, int64_t owner) {
    struct endpoint *e = &rt->net.ep[owner];
    char where[512];
    if (!e->listed)
        return rt_fail(rt, RT_USAGE, "peers file '%s' has no endpoint for owner %lld", rt->net.peers_path,
                       (long long)owner);
    if (e->addr_len) return RT_OK;
    char port[8];
    snprintf(port, sizeof port, "%d", e->port);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    int rc = getaddrinfo(e->host, port, &hints, &res);
    if (rc != 0 || !res)
        return rt_fail(rt, RT_USAGE, "%s: host '%s' does not resolve (%s)", origin(rt, e, where, sizeof where),
                       e->host, gai_strerror(rc));
    memcpy(&e->addr, res->ai_addr, res->ai_addrlen);
    e->addr_len = res->ai_addrlen;
    freeaddrinfo(res);
    return RT_OK;
}

static int read_file(struct rt *rt) {
    int rc;
    FILE *f = rt_open_text(rt->net.peers_path);
    if (!f) return rt_fail(rt, RT_IO_ERROR, "cannot read the peers file '%s'", rt->net.peers_path);
    char text[1024];
    int64_t line = 0;
    rc = RT_OK;
    for (int r; rc == RT_OK && (r = rt_read_line(f, text, sizeof text)) != 0;) {
        line++;
        if (r == LINE_LONG) {
            rc = rt_fail(rt, RT_USAGE, "peers file '%s' line %lld is longer than %zu characters",
                         rt->net.peers_path, (long long)line, sizeof text - 2);
            break;
        }
        if (r == LINE_NUL) {
            rc = rt_fail(rt, RT_USAGE, "peers file '%s' line %lld holds a NUL byte", rt->net.peers_path, (long long)line);
            break;
        }
        char *p = text;
        while (isspace((unsigned char)*p)) p++;
        if (*p && *p != '#') rc = parse_line(rt, text, line);
    }
    fclose(f);
    return rc;
}

int rt_read_peers(struct rt *rt) {
    int rc;
    char where[512];
    rt->net.ep = rt_alloc_words(rt, (int64_t)((sizeof(struct endpoint) * (size_t)rt->n + 7) / 8), &rc);
    TRY(rc);
    TRY(rt->net.peers_path ? read_file(rt) : rt_node_endpoints(rt));
    /* every owner this one talks to, and itself, need an endpoint */
    TRY(resolve(rt, rt->owner));
    const struct endpoint *me = &rt->net.ep[rt->owner];
    int any = (me->addr.ss_family == AF_INET &&
               ((const struct sockaddr_in *)&me->addr)->sin_addr.s_addr == htonl(INADDR_ANY)) ||
              (me->addr.ss_family == AF_INET6 &&
               IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)&me->addr)->sin6_addr));
    if (any && !rt->net.listen_any)
        return rt_fail(rt, RT_USAGE, "%s names the wildcard address '%s' for owner %lld; "
                       "an owner listens only on its own address (--listen-any to listen on every interface)",
                       origin(rt, me, where, sizeof where), me->host, (long long)rt->owner);
    const uint64_t *peers = img_sec(rt, SEC_PEERS) + img_mine(rt, SEC_PEER_START);
    for (int64_t j = 0; j < img_mine(rt, SEC_PEER_COUNT); j++) TRY(resolve(rt, (int64_t)peers[j]));
    return RT_OK;
}
