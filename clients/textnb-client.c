/* textnb-client: the compiled thin client of `textnb serve`, as spamc is to spamd.
 *
 * It does what the Python `textnb-client` (textnb/delivery/client.py) does, with the same
 * options, exit codes and output, byte for byte: read one message on stdin, ask the
 * resident scorer for its verdict, and write the message to stdout with the verdict
 * headers inserted exactly where and how textnb/delivery/verdict_headers.py inserts them. What it saves
 * is the Python interpreter's start-up on every message (20 ms bare, more with
 * site-packages), which is most of the Python client's time.
 *
 * When the scorer is down, too slow or refuses the message, the message is scored in
 * process by `textnb filter`, run as a child and fed the message on its stdin:
 * - a child, not exec: this process keeps the message and checks what comes back, so
 *   a fallback that cannot start or dies (exit 127, a traceback, no verdict header)
 *   still delivers the message unchanged, with exit 3;
 * - `textnb filter`, not the Python client: the scorer was just found unavailable,
 *   and the Python client would ask it again (and wait out a timeout a second time).
 *
 * The protocol is documented at the top of textnb/delivery/client.py. Build with
 * `make -C clients`: it sets TEXTNB_VERSION from textnb/__init__.py (the
 * X-TextNB-Score header carries it) and TEXTNB_COMMAND to the `textnb` found at
 * build time. C99 and POSIX only.
 */
#define _POSIX_C_SOURCE 200809L
/* SO_PEERCRED (Linux): glibc and musl define it only beyond strict POSIX. Where it is
 * not defined, the peer check below is left out. */
#define _DEFAULT_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef TEXTNB_VERSION
#error "TEXTNB_VERSION is not set: build with 'make -C clients', which reads it from textnb/__init__.py"
#endif
#ifndef TEXTNB_COMMAND
#define TEXTNB_COMMAND "textnb"
#endif

#define EXIT_ERROR 3
/* The same bounds as textnb/delivery/client.py (MAX_LINE, MAX_MESSAGE_BYTES, DEFAULT_TIMEOUT):
 * the client sends at most one byte more than the parser keeps, so the scorer sees
 * exactly what an in-process filter would. */
#define MAX_LINE 1024
#define MAX_MESSAGE_BYTES 10000001
#define DEFAULT_TIMEOUT 10.0
#define MAX_NUMBER 32
#define NONCE_BYTES 16
#define MIN_KEY_BYTES 32
#define MAX_KEY_BYTES 4096
#define PROTOCOL "TEXTNB/1"
#define ERR_SIZE 600

static const char USAGE[] =
    "usage: textnb-client [--server ADDR] [--model PATH] [--cost-ratio R] [--spamassassin]\n"
    "                     [--always-exit-0] [--no-fallback] [--timeout SECONDS] [--ping]\n"
    "                     [--user NAME] [--learn spam|ham | --forget]\n"
    "                     [--key-file PATH | --insecure-tcp]\n"
    "\n"
    "Filter one message (stdin -> stdout, verdict headers added) through a running\n"
    "'textnb serve'; score in process when it is down. Exit 0 spam, 1 ham, 2 unsure,\n"
    "3 error (the message is still written, unchanged).\n"
    "\n"
    "  --server ADDR      Unix socket path, or HOST:PORT (default: $TEXTNB_SOCKET or\n"
    "                     ~/.local/share/textnb/scorer.sock)\n"
    "  --model PATH       model for the in-process fallback (default: $TEXTNB_MODEL or\n"
    "                     ~/.local/share/textnb/model.tnb)\n"
    "  --cost-ratio R     cost of losing a ham / cost of letting a spam through\n"
    "  --spamassassin     also write X-Spam-Flag / X-Spam-Status\n"
    "  --always-exit-0    exit 0 whatever the verdict (for agents that treat non-zero\n"
    "                     as failure); a failure to write the message still exits 3\n"
    "  --no-fallback      never score in process: pass the message through, exit 3\n"
    "  --timeout SECONDS  give up on the scorer after this long, for the whole exchange:\n"
    "                     connect, send and the whole reply (default 10)\n"
    "  --ping             print the scorer's status instead of filtering\n"
    "  --user NAME        the user whose model scores or learns ('textnb serve --models')\n"
    "  --learn spam|ham   learn the message on stdin as spam or ham instead of filtering;\n"
    "                     prints what the scorer did; exit 0 once it is durable, 3 if not\n"
    "  --forget           forget the message on stdin (exit 0 done, 3 not done)\n"
    "  --key-file PATH    the scorer's shared key ('textnb serve --key-file'; default\n"
    "                     $TEXTNB_KEY_FILE): each reply must prove the scorer holds it.\n"
    "                     A TCP scorer is asked only with a key or --insecure-tcp\n"
    "  --insecure-tcp     believe a TCP scorer without a key (whoever binds its port\n"
    "                     while it is down is believed too)\n"
    "\n"
    "This is the compiled client (textnb " TEXTNB_VERSION "). The in-process fallback runs\n"
    "'$TEXTNB_COMMAND filter' (default: " TEXTNB_COMMAND ").\n";

/* -- growing byte buffers -------------------------------------------------------- */

struct buffer {
    char *data;
    size_t len, cap;
};

static int buffer_reserve(struct buffer *b, size_t extra)
{
    size_t cap = b->cap ? b->cap : 65536;
    char *data;
    while (cap - b->len < extra) {
        if (cap > SIZE_MAX / 2)
            return -1;
        cap *= 2;
    }
    if (cap == b->cap)
        return 0;
    data = realloc(b->data, cap);
    if (data == NULL)
        return -1;
    b->data = data;
    b->cap = cap;
    return 0;
}

/* All of fd into b; -1 with errno on a read error or ENOMEM (b keeps what was read). */
static int read_all(int fd, struct buffer *b)
{
    for (;;) {
        ssize_t got;
        if (buffer_reserve(b, 65536) != 0) {
            errno = ENOMEM;
            return -1;
        }
        got = read(fd, b->data + b->len, b->cap - b->len);
        if (got == 0)
            return 0;
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        b->len += (size_t)got;
    }
}

static int write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t put = write(fd, data, len);
        if (put < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        data += put;
        len -= (size_t)put;
    }
    return 0;
}

/* Copy the rest of stdin to stdout: the last resort that still delivers the message. */
static void copy_through(void)
{
    char chunk[65536];
    ssize_t got;
    while ((got = read(0, chunk, sizeof chunk)) != 0) {
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        if (write_all(1, chunk, (size_t)got) != 0)
            return;
    }
}

/* -- options (parsed as textnb.delivery.client.parse_args does) ------------------------------ */

struct options {
    const char *server, *model, *cost_text, *timeout_text, *user, *learn, *key_file;
    double cost_ratio, timeout;
    int spamassassin, always_exit_0, no_fallback, ping, forget, help, insecure_tcp;
    unsigned char key[MAX_KEY_BYTES + 1];
    size_t key_len; /* 0: no key */
};

static int read_key(const char *path, struct options *o, char *err);

/* Python's float() for the numbers a user types; strtod's hexadecimal and nan(...)
 * forms are refused so that both clients accept the same values. */
static int parse_float(const char *text, double *out)
{
    char *end;
    if (text[0] == '\0' || strpbrk(text, "xX(") != NULL)
        return -1;
    errno = 0;
    *out = strtod(text, &end);
    if (end == text)
        return -1;
    while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r' || *end == '\v' ||
           *end == '\f')
        end++;
    return *end == '\0' ? 0 : -1;
}

static int parse_args(int argc, char **argv, struct options *o, char *err)
{
    static const char *const flags[] = {"--spamassassin", "--always-exit-0", "--no-fallback",
                                        "--ping", "--forget", "--insecure-tcp"};
    static const char *const valued[] = {"--server", "--model", "--cost-ratio", "--timeout",
                                         "--user", "--learn", "--key-file"};
    const char **slots[7];
    int flag_hit = -1, valued_hit = -1;
    int i, k;

    slots[0] = &o->server;
    slots[1] = &o->model;
    slots[2] = &o->cost_text;
    slots[3] = &o->timeout_text;
    slots[4] = &o->user;
    slots[5] = &o->learn;
    slots[6] = &o->key_file;
    for (i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *eq = strchr(arg, '=');
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        flag_hit = valued_hit = -1;
        for (k = 0; k < 7; k++) {
            if (k < 6 && strlen(flags[k]) == name_len && strncmp(arg, flags[k], name_len) == 0)
                flag_hit = k;
            if (strlen(valued[k]) == name_len && strncmp(arg, valued[k], name_len) == 0)
                valued_hit = k;
        }
        if (flag_hit >= 0 && eq == NULL) {
            int *fields[6];
            fields[0] = &o->spamassassin;
            fields[1] = &o->always_exit_0;
            fields[2] = &o->no_fallback;
            fields[3] = &o->ping;
            fields[4] = &o->forget;
            fields[5] = &o->insecure_tcp;
            *fields[flag_hit] = 1;
        } else if (valued_hit >= 0) {
            const char *value = eq ? eq + 1 : NULL;
            if (value == NULL) {
                if (i + 1 >= argc) {
                    snprintf(err, ERR_SIZE, "%s needs a value", valued[valued_hit]);
                    return -1;
                }
                value = argv[++i];
            }
            *slots[valued_hit] = value;
        } else if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            o->help = 1;
        } else {
            snprintf(err, ERR_SIZE, "unknown option '%s'", arg);
            return -1;
        }
    }
    o->timeout = DEFAULT_TIMEOUT;
    if (o->cost_text != NULL &&
        (parse_float(o->cost_text, &o->cost_ratio) != 0 || !(o->cost_ratio > 0))) {
        snprintf(err, ERR_SIZE, "--cost-ratio '%s' must be a number > 0", o->cost_text);
        return -1;
    }
    if (o->timeout_text != NULL &&
        (parse_float(o->timeout_text, &o->timeout) != 0 || !(o->timeout > 0))) {
        snprintf(err, ERR_SIZE, "--timeout '%s' must be a number > 0", o->timeout_text);
        return -1;
    }
    if (o->learn != NULL && strcmp(o->learn, "spam") != 0 && strcmp(o->learn, "ham") != 0) {
        snprintf(err, ERR_SIZE, "--learn '%s' must be spam or ham", o->learn);
        return -1;
    }
    if (o->learn != NULL && o->forget) {
        snprintf(err, ERR_SIZE, "--learn and --forget exclude each other");
        return -1;
    }
    if (o->user != NULL) {
        const unsigned char *c;
        for (c = (const unsigned char *)o->user; *c; c++)
            if (*c <= 32 || *c == 127)
                break;
        if (*c != '\0' || o->user[0] == '\0' || strlen(o->user) > 200) {
            snprintf(err, ERR_SIZE, "--user '%.200s' must be 1-200 characters without spaces or "
                     "control characters", o->user);
            return -1;
        }
    }
    if (o->key_file == NULL && getenv("TEXTNB_KEY_FILE") != NULL)
        o->key_file = getenv("TEXTNB_KEY_FILE");
    if (o->key_file != NULL && o->key_file[0] != '\0')
        return read_key(o->key_file, o, err);
    return 0;
}

/* -- addresses ------------------------------------------------------------------------ */

static char *concat(const char *a, const char *b, const char *c)
{
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    char *out = malloc(la + lb + lc + 1);
    if (out == NULL) {
        fputs("textnb-client: out of memory\n", stderr);
        exit(EXIT_ERROR);
    }
    memcpy(out, a, la);
    memcpy(out + la, b, lb);
    memcpy(out + la + lb, c, lc + 1);
    return out;
}

/* Python's os.path.expanduser: "~" and "~user" at the start; else the path unchanged. */
static char *expand_user(const char *path)
{
    const char *slash, *home = NULL;
    char *name, *out;
    size_t len;
    struct passwd *pw;

    if (path[0] != '~')
        return concat(path, "", "");
    slash = strchr(path, '/');
    if (slash == NULL)
        slash = path + strlen(path);
    if (slash == path + 1) {
        home = getenv("HOME");
        if (home == NULL) {
            pw = getpwuid(getuid());
            home = pw ? pw->pw_dir : NULL;
        }
    } else {
        name = malloc((size_t)(slash - path));
        if (name == NULL)
            return concat(path, "", "");
        memcpy(name, path + 1, (size_t)(slash - path - 1));
        name[slash - path - 1] = '\0';
        pw = getpwnam(name);
        free(name);
        home = pw ? pw->pw_dir : NULL;
    }
    if (home == NULL)
        return concat(path, "", "");
    len = strlen(home);
    while (len > 0 && home[len - 1] == '/')
        len--;
    out = malloc(len + strlen(slash) + 2);
    if (out == NULL)
        return concat(path, "", "");
    memcpy(out, home, len);
    strcpy(out + len, slash);
    if (out[0] == '\0')
        strcpy(out, "/");
    return out;
}

/* $TEXTNB_SOCKET, else scorer.sock beside the default model (XDG data dir). */
static char *default_socket(void)
{
    const char *env = getenv("TEXTNB_SOCKET"), *xdg = getenv("XDG_DATA_HOME");
    char *home, *base, *out;
    if (env != NULL && env[0] != '\0')
        return expand_user(env);
    home = expand_user("~");
    if (xdg != NULL && xdg[0] != '\0')
        base = concat(xdg, "", "");
    else
        base = concat(home, home[strlen(home) - 1] == '/' ? "" : "/", ".local/share");
    out = concat(base, base[strlen(base) - 1] == '/' ? "" : "/", "textnb/scorer.sock");
    free(home);
    free(base);
    return out;
}

struct address {
    int tcp;
    char *path;       /* Unix socket */
    char *host, *port; /* TCP */
    char *shown;      /* for messages, as textnb.delivery.client.show_address writes it */
};

/* A Unix socket path, or HOST:PORT, :PORT, [::1]:PORT (textnb.delivery.client.parse_address). */
static void parse_address(const char *spec, struct address *a)
{
    const char *colon = strrchr(spec, ':');
    const char *p;
    int digits = colon != NULL && colon[1] != '\0';
    memset(a, 0, sizeof *a);
    for (p = colon ? colon + 1 : ""; *p; p++)
        if (*p < '0' || *p > '9')
            digits = 0;
    if (!digits || strchr(spec, '/') != NULL) {
        a->path = concat(spec, "", "");
        a->shown = a->path;
        return;
    }
    a->tcp = 1;
    a->host = concat(spec, "", "");
    a->host[colon - spec] = '\0';
    if (a->host[0] == '[' && strlen(a->host) >= 2 && a->host[strlen(a->host) - 1] == ']') {
        memmove(a->host, a->host + 1, strlen(a->host));
        a->host[strlen(a->host) - 1] = '\0';
    }
    if (a->host[0] == '\0') {
        free(a->host);
        a->host = concat("127.0.0.1", "", "");
    }
    a->port = concat(colon + 1, "", "");
    a->shown = malloc(strlen(a->host) + strlen(a->port) + 4);
    if (a->shown == NULL)
        a->shown = a->host;
    else if (strchr(a->host, ':') != NULL)
        sprintf(a->shown, "[%s]:%s", a->host, a->port);
    else
        sprintf(a->shown, "%s:%s", a->host, a->port);
}

/* -- the shared key: SHA-256, HMAC, and the key file ------------------------------------ */

/* SHA-256 (FIPS 180-4) and HMAC (RFC 2104), for the MAC a scorer with --key-file appends
 * to its replies (textnb.delivery.client.reply_mac); C99 has no hash of its own, and a
 * library would be a dependency of the one file this client is. */
struct sha256 {
    uint32_t h[8];
    uint64_t len;
    unsigned char buf[64];
    size_t n;
};

static const uint32_t SHA256_K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64], v[8];
    int i;
    for (i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (i = 16; i < 64; i++)
        w[i] = w[i - 16] + (ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3)) +
               w[i - 7] + (ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10));
    memcpy(v, h, sizeof v);
    for (i = 0; i < 64; i++) {
        uint32_t t1 = v[7] + (ROR(v[4], 6) ^ ROR(v[4], 11) ^ ROR(v[4], 25)) +
                      ((v[4] & v[5]) ^ (~v[4] & v[6])) + SHA256_K[i] + w[i];
        uint32_t t2 = (ROR(v[0], 2) ^ ROR(v[0], 13) ^ ROR(v[0], 22)) +
                      ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
        memmove(v + 1, v, 7 * sizeof v[0]);
        v[4] += t1;
        v[0] = t1 + t2;
    }
    for (i = 0; i < 8; i++)
        h[i] += v[i];
}

static void sha256_init(struct sha256 *s)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, iv, sizeof iv);
    s->len = 0;
    s->n = 0;
}

static void sha256_update(struct sha256 *s, const void *data, size_t len)
{
    const unsigned char *p = data;
    s->len += len;
    while (len > 0) {
        size_t take = 64 - s->n < len ? 64 - s->n : len;
        memcpy(s->buf + s->n, p, take);
        s->n += take;
        p += take;
        len -= take;
        if (s->n == 64) {
            sha256_block(s->h, s->buf);
            s->n = 0;
        }
    }
}

static void sha256_final(struct sha256 *s, unsigned char out[32])
{
    uint64_t bits = s->len * 8;
    unsigned char pad = 0x80, zero = 0, length[8];
    int i;
    sha256_update(s, &pad, 1);
    while (s->n != 56)
        sha256_update(s, &zero, 1);
    for (i = 0; i < 8; i++)
        length[i] = (unsigned char)(bits >> (56 - 8 * i));
    sha256_update(s, length, 8);
    for (i = 0; i < 32; i++)
        out[i] = (unsigned char)(s->h[i / 4] >> (24 - 8 * (i % 4)));
}

/* HMAC-SHA256(key, nonce "\n" line) in lower-case hex (65 bytes with the NUL). */
static void reply_mac(const struct options *o, const char *nonce, const char *line,
                      size_t line_len, char hex[65])
{
    unsigned char k[64], pad[64], inner[32], mac[32];
    struct sha256 s;
    int i;
    memset(k, 0, sizeof k);
    if (o->key_len > 64) {
        sha256_init(&s);
        sha256_update(&s, o->key, o->key_len);
        sha256_final(&s, k);
    } else {
        memcpy(k, o->key, o->key_len);
    }
    for (i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x36;
    sha256_init(&s);
    sha256_update(&s, pad, 64);
    sha256_update(&s, nonce, strlen(nonce));
    sha256_update(&s, "\n", 1);
    sha256_update(&s, line, line_len);
    sha256_final(&s, inner);
    for (i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x5c;
    sha256_init(&s);
    sha256_update(&s, pad, 64);
    sha256_update(&s, inner, 32);
    sha256_final(&s, mac);
    for (i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", mac[i]);
}

static int is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* The secret in a key file, surrounding whitespace dropped, into o->key
 * (textnb.delivery.client.read_key, with its messages). */
static int read_key(const char *given, struct options *o, char *err)
{
    char *path = expand_user(given);
    struct stat st;
    ssize_t got;
    size_t len = 0, start = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        snprintf(err, ERR_SIZE, "key file %.200s: %s; make one with 'openssl rand -hex 32 > "
                 "%.100s; chmod 600 %.100s'", path, strerror(errno), path, path);
        free(path);
        return -1;
    }
    if (fstat(fd, &st) == 0 && (st.st_mode & 077)) {
        snprintf(err, ERR_SIZE, "key file %.200s has mode %04o: others could read the key; "
                 "'chmod 600 %.200s'", path, (unsigned)(st.st_mode & 0777), path);
        close(fd);
        free(path);
        return -1;
    }
    while (len < sizeof o->key && (got = read(fd, o->key + len, sizeof o->key - len)) != 0) {
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            snprintf(err, ERR_SIZE, "key file %.200s: %s; make one with 'openssl rand -hex 32 > "
                     "%.100s; chmod 600 %.100s'", path, strerror(errno), path, path);
            close(fd);
            free(path);
            return -1;
        }
        len += (size_t)got;
    }
    close(fd);
    while (start < len && is_space(o->key[start]))
        start++;
    while (len > start && is_space(o->key[len - 1]))
        len--;
    memmove(o->key, o->key + start, len - start);
    o->key_len = len - start;
    if (o->key_len < MIN_KEY_BYTES || o->key_len > MAX_KEY_BYTES) {
        snprintf(err, ERR_SIZE, "key file %.200s holds %lu bytes, not %d to %d; make one with "
                 "'openssl rand -hex 32 > %.100s; chmod 600 %.100s'", path,
                 (unsigned long)o->key_len, MIN_KEY_BYTES, MAX_KEY_BYTES, path, path);
        free(path);
        return -1;
    }
    free(path);
    return 0;
}

/* NONCE_BYTES random bytes in hex. */
static int make_nonce(char hex[2 * NONCE_BYTES + 1])
{
    unsigned char bytes[NONCE_BYTES];
    size_t got = 0;
    int i, fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    while (got < sizeof bytes) {
        ssize_t n = read(fd, bytes + got, sizeof bytes - got);
        if (n <= 0 && !(n < 0 && errno == EINTR)) {
            close(fd);
            return -1;
        }
        if (n > 0)
            got += (size_t)n;
    }
    close(fd);
    for (i = 0; i < NONCE_BYTES; i++)
        snprintf(hex + 2 * i, 3, "%02x", bytes[i]);
    return 0;
}

/* -- the exchange with the scorer ------------------------------------------------------ */

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Wait until fd is ready for events or the deadline passes (-1, errno ETIMEDOUT). */
static int wait_fd(int fd, short events, double deadline)
{
    struct pollfd pfd;
    pfd.fd = fd;
    pfd.events = events;
    for (;;) {
        int ms = -1, ready;
        if (!isinf(deadline)) {
            double left = deadline - now_seconds();
            if (left <= 0) {
                errno = ETIMEDOUT;
                return -1;
            }
            ms = left * 1000 >= INT_MAX - 1 ? INT_MAX : (int)(left * 1000) + 1;
        }
        ready = poll(&pfd, 1, ms);
        if (ready > 0)
            return 0;
        if (ready < 0 && errno != EINTR)
            return -1;
    }
}

/* Fill err with "<address>: <reason>" as textnb.delivery.client._exchange words it. */
static int fail(char *err, const struct address *a, const char *reason)
{
    snprintf(err, ERR_SIZE, "%s: %s", a->shown, reason);
    return -1;
}

static const char *reason_of(int error)
{
    return error == ETIMEDOUT ? "timed out" : strerror(error);
}

/* A socket of our own user, or one in a folder no third user can write to: owned by root
 * or by the socket's owner, and not writable by group or others. Anyone can create a
 * socket in a shared folder such as /tmp, and a scorer that answers "ham" to everything
 * would be an easy way in; in such a folder only the scorer's own user (or root) can
 * have put it, as for 'textnb serve --user-from-peer' (docs/learning.md). */
static int trusted_socket(const char *path, const struct stat *st)
{
    struct stat folder;
    const char *slash = strrchr(path, '/');
    char *dir;
    int ok;

    if (st->st_uid == getuid())
        return 1;
    if (slash == NULL)
        dir = concat(".", "", "");
    else if (slash == path)
        dir = concat("/", "", "");
    else {
        dir = concat(path, "", "");
        dir[slash - path] = '\0';
    }
    ok = stat(dir, &folder) == 0 && (folder.st_uid == 0 || folder.st_uid == st->st_uid)
         && !(folder.st_mode & (S_IWGRP | S_IWOTH));
    free(dir);
    return ok;
}

static int connect_scorer(const struct address *a, double deadline, char *err)
{
    struct sockaddr_un un;
    struct addrinfo hints, *infos = NULL;
    const struct sockaddr *target;
    socklen_t target_len;
    int fd, family, proto = 0, soerr = 0;
    socklen_t soerr_len = sizeof soerr;
    long owner = -1;

    if (a->tcp) {
        int gai;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        gai = getaddrinfo(a->host, a->port, &hints, &infos);
        if (gai != 0)
            return fail(err, a, gai == EAI_SYSTEM ? strerror(errno) : gai_strerror(gai));
        family = infos->ai_family;
        proto = infos->ai_protocol;
        target = infos->ai_addr;
        target_len = infos->ai_addrlen;
    } else {
        struct stat st;
        if (stat(a->path, &st) != 0)
            return fail(err, a, strerror(errno));
        if (!trusted_socket(a->path, &st)) {
            snprintf(err, ERR_SIZE, "socket %s belongs to uid %ld, not to this user, in a "
                     "folder others can write to", a->path, (long)st.st_uid);
            return -1;
        }
        owner = (long)st.st_uid;
        if (strlen(a->path) >= sizeof un.sun_path)
            return fail(err, a, "AF_UNIX path too long");
        memset(&un, 0, sizeof un);
        un.sun_family = AF_UNIX;
        strcpy(un.sun_path, a->path);
        family = AF_UNIX;
        target = (const struct sockaddr *)&un;
        target_len = sizeof un;
    }
    fd = socket(family, SOCK_STREAM, proto);
    if (fd < 0 || fcntl(fd, F_SETFL, O_NONBLOCK) != 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
        int saved = errno;
        if (fd >= 0)
            close(fd);
        if (infos)
            freeaddrinfo(infos);
        return fail(err, a, strerror(saved));
    }
    if (connect(fd, target, target_len) != 0) {
        int saved = errno;
        if (saved == EINPROGRESS || saved == EINTR) {
            if (wait_fd(fd, POLLOUT, deadline) != 0)
                saved = errno;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &soerr_len) != 0)
                saved = errno;
            else
                saved = soerr;
        }
        if (saved != 0) {
            close(fd);
            if (infos)
                freeaddrinfo(infos);
            return fail(err, a, reason_of(saved));
        }
    }
    if (infos)
        freeaddrinfo(infos);
#ifdef SO_PEERCRED
    /* Who listens, in the kernel's word: between the socket file's check above and the
     * connect, whoever can write to its folder could have renamed their own socket into
     * place. The owner or root (textnb.delivery.client._check_peer). */
    if (owner >= 0) {
        int creds[3]; /* pid, uid, gid */
        socklen_t creds_len = sizeof creds;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, creds, &creds_len) == 0 &&
            (long)creds[1] != owner && creds[1] != 0) {
            snprintf(err, ERR_SIZE, "socket %s is owned by uid %ld but uid %ld listens on it; "
                     "not asking it", a->path, owner, (long)creds[1]);
            close(fd);
            return -1;
        }
    }
#endif
    return fd;
}

/* The first `limit` bytes of a reply line, printable, for an error message. */
static void show_bytes_upto(const char *text, char *out, size_t size, size_t limit)
{
    size_t o = 0, i;
    for (i = 0; text[i] != '\0' && i < limit && o + 5 < size; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c >= 32 && c < 127 && c != '\\')
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, size - o, "\\x%02x", c);
    }
    out[o] = '\0';
}

static void show_bytes(const char *text, char *out, size_t size)
{
    show_bytes_upto(text, out, size, 80);
}

/* Whether a TCP scorer may be asked: with a key, or --insecure-tcp
 * (textnb.delivery.client.unauthenticated_tcp, with its message). */
static int unauthenticated_tcp(const struct address *a, const struct options *o, char *err)
{
    if (!a->tcp || o->key_len > 0 || o->insecure_tcp)
        return 0;
    snprintf(err, ERR_SIZE, "%s is TCP and no --key-file was given: whoever binds the port while "
             "the scorer is down would be believed; give the scorer's key file (--key-file or "
             "$TEXTNB_KEY_FILE), or pass --insecure-tcp to trust the port", a->shown);
    return -1;
}

/* The reply line in reply[0..got) after "TEXTNB/1 ", moved to reply's start, if it keeps
 * the line rules both clients apply (textnb.delivery.client.reply_rest); with a key,
 * also its MAC checked and dropped (_authentic). -1 with err filled if not. */
static int reply_rest(const struct address *a, const struct options *o, const char *nonce,
                      char *reply, size_t got, char *err)
{
    static const char prefix[] = PROTOCOL " ";
    char shown[400], *newline = memchr(reply, '\n', got), *mac;
    size_t len = newline ? (size_t)(newline - reply) : got, i;

    reply[len] = '\0';
    if (len < sizeof prefix - 1 || memcmp(reply, prefix, sizeof prefix - 1) != 0) {
        show_bytes(reply, shown, sizeof shown);
        snprintf(err, ERR_SIZE, "not a textnb scorer reply: '%s'", shown);
        return -1;
    }
    show_bytes(reply, shown, sizeof shown);
    if (newline == NULL || len >= MAX_LINE) {
        snprintf(err, ERR_SIZE, "malformed scorer reply: no line end within %d bytes: '%s'",
                 MAX_LINE, shown);
        return -1;
    }
    for (i = 0; i < len; i++)
        if ((unsigned char)reply[i] < 0x20 || reply[i] == 0x7f) {
            snprintf(err, ERR_SIZE, "malformed scorer reply: control bytes in '%s'", shown);
            return -1;
        }
    if (o->key_len > 0) {
        char expected[65];
        unsigned diff = 0;
        mac = NULL;
        for (i = len; i-- > 0;)
            if (strncmp(reply + i, " mac=", 5) == 0) {
                mac = reply + i;
                break;
            }
        if (strncmp(reply + sizeof prefix - 1, "ERROR", 5) == 0) {
            if (mac != NULL)
                *mac = '\0';
        } else {
            if (mac != NULL) {
                reply_mac(o, nonce, reply, (size_t)(mac - reply), expected);
                diff = strlen(mac + 5) != 64;
                for (i = 0; !diff && i < 64; i++)
                    diff |= (unsigned)(mac[5 + i] ^ expected[i]);
            }
            if (mac == NULL || diff) {
                snprintf(err, ERR_SIZE, "the scorer at %s did not prove it holds the key of "
                         "--key-file (an impostor on its address, or a scorer started without "
                         "that --key-file)", a->shown);
                return -1;
            }
            *mac = '\0';
        }
    }
    memmove(reply, reply + sizeof prefix - 1, strlen(reply + sizeof prefix - 1) + 1);
    return 0;
}

/* exchange()'s result when the request was sent and no reply came: it may have been acted on. */
#define NO_ANSWER (-2)
/* textnb/delivery/client.py's NO_ANSWER_NOTE, word for word */
#define NO_ANSWER_NOTE " (sent, not answered; sending it again is safe: a message learned twice counts once)"

/* Send head and body and read the reply's line, all within o->timeout: connect, send and
 * the whole reply share one deadline, so a scorer that drips its reply a byte at a time
 * is cut off then too (textnb.delivery.client._exchange). RETURNS 0 with the reply after
 * "TEXTNB/1 " in reply (reply_rest), -1 or NO_ANSWER with err filled. */
static int exchange(const struct address *a, const struct options *o, const char *head,
                    size_t head_len, const char *body, size_t body_len, char *reply,
                    size_t reply_size, char *err)
{
    struct iovec iov[2];
    char signed_head[600], nonce[2 * NONCE_BYTES + 1] = "";
    int n_iov = 2, fd;
    size_t got = 0;
    double deadline = now_seconds() + o->timeout;

    if (unauthenticated_tcp(a, o, err) != 0)
        return -1;
    if (o->key_len > 0) { /* the head ends in "\n": the nonce goes before it */
        if (make_nonce(nonce) != 0 || head_len + 8 + sizeof nonce > sizeof signed_head)
            return fail(err, a, "cannot make a nonce from /dev/urandom");
        memcpy(signed_head, head, head_len - 1);
        head_len = head_len - 1 + (size_t)sprintf(signed_head + head_len - 1, " nonce=%s\n",
                                                  nonce);
        head = signed_head;
    }
    fd = connect_scorer(a, deadline, err);
    if (fd < 0)
        return -1;
    iov[0].iov_base = (void *)head;
    iov[0].iov_len = head_len;
    iov[1].iov_base = (void *)body;
    iov[1].iov_len = body_len;
    while (n_iov > 0) {
        struct iovec *first = iov + (2 - n_iov);
        ssize_t put = writev(fd, first, n_iov);
        if (put < 0) {
            int saved = errno;
            if (saved == EINTR)
                continue;
            if ((saved == EAGAIN || saved == EWOULDBLOCK) && wait_fd(fd, POLLOUT, deadline) == 0)
                continue;
            close(fd);
            return fail(err, a, reason_of(saved == EAGAIN || saved == EWOULDBLOCK ? errno : saved));
        }
        while (n_iov > 0 && (size_t)put >= iov[2 - n_iov].iov_len) {
            put -= (ssize_t)iov[2 - n_iov].iov_len;
            iov[2 - n_iov].iov_len = 0;
            n_iov--;
        }
        if (n_iov > 0) {
            iov[2 - n_iov].iov_base = (char *)iov[2 - n_iov].iov_base + put;
            iov[2 - n_iov].iov_len -= (size_t)put;
        }
    }
    /* From here the request is sent: a failure is NO_ANSWER, the scorer may have acted on it. */
    for (;;) {
        ssize_t chunk;
        if (wait_fd(fd, POLLIN, deadline) != 0) {
            int saved = errno;
            close(fd);
            fail(err, a, reason_of(saved));
            return NO_ANSWER;
        }
        chunk = read(fd, reply + got, reply_size - 1 - got);
        if (chunk < 0) {
            int saved = errno;
            if (saved == EINTR || saved == EAGAIN || saved == EWOULDBLOCK)
                continue;
            close(fd);
            fail(err, a, reason_of(saved));
            return NO_ANSWER;
        }
        if (chunk == 0)
            break;
        got += (size_t)chunk;
        if (memchr(reply + got - (size_t)chunk, '\n', (size_t)chunk) != NULL || got > MAX_LINE ||
            got == reply_size - 1)
            break;
    }
    close(fd);
    return reply_rest(a, o, nonce, reply, got, err);
}

struct verdict {
    const char *label; /* "spam", "ham" or "unsure" */
    int exit_code;
    double log_odds, p_spam, threshold;
};

static const char *const LABELS[3] = {"spam", "ham", "unsure"}; /* in exit-code order */

/* " user=NAME" on a request line, or nothing: two %s arguments. */
#define USER_FIELD(o) ((o)->user ? " user=" : ""), ((o)->user ? (o)->user : "")

/* A finite number as Python's repr writes one, of at most MAX_NUMBER characters
 * (textnb.delivery.client.reply_number). */
static int reply_number(const char *word, double *out)
{
    const char *p = word;
    size_t len = strlen(word);
    if (len == 0 || len > MAX_NUMBER)
        return -1;
    if (*p == '-')
        p++;
    if (*p < '0' || *p > '9')
        return -1;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return -1;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'e') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (*p < '0' || *p > '9')
            return -1;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p != '\0')
        return -1;
    *out = strtod(word, NULL);
    return isfinite(*out) ? 0 : -1;
}

/* A reply's threshold: a finite number as reply_number reads one, or "inf" / "-inf" as
 * Python's repr writes them: a tuned model whose map never reaches the cost ratio's
 * probability flags nothing, one whose map starts above it flags everything
 * (textnb.delivery.client.reply_threshold). */
static int reply_threshold(const char *word, double *out)
{
    if (strcmp(word, "inf") == 0 || strcmp(word, "-inf") == 0) {
        *out = word[0] == '-' ? -INFINITY : INFINITY;
        return 0;
    }
    return reply_number(word, out);
}

/* A learn's outcome word (new, moved, known, spam, not-found): a-z and '-', at most 32,
 * starting with a letter (textnb.delivery.client._reply_word). */
static int reply_word(const char *word)
{
    size_t i, len = strlen(word);
    if (len == 0 || len > 32 || word[0] < 'a' || word[0] > 'z')
        return 0;
    for (i = 0; i < len; i++)
        if ((word[i] < 'a' || word[i] > 'z') && word[i] != '-')
            return 0;
    return 1;
}

/* Split text at each single space (an empty word where two meet, as Python's
 * split(b" ")); RETURNS the number of words, or max + 1 when there are more. */
static int split_words(char *text, char **words, int max)
{
    int n = 0;
    for (;;) {
        char *space = strchr(text, ' ');
        if (n == max)
            return max + 1;
        words[n++] = text;
        if (space == NULL)
            return n;
        *space = '\0';
        text = space + 1;
    }
}

/* The message for a reply that is not the one expected: the scorer's ERROR text, or the
 * reply itself (textnb.delivery.client._refused). */
static void refused(const struct address *a, const char *rest, char *err)
{
    char shown[400];
    if (strncmp(rest, "ERROR ", 6) == 0) {
        show_bytes(rest + 6, shown, sizeof shown);
        snprintf(err, ERR_SIZE, "the scorer at %s said: %s", a->shown, shown);
    } else {
        show_bytes(rest, shown, sizeof shown);
        snprintf(err, ERR_SIZE, "malformed scorer reply: '%s'", shown);
    }
}

/* The resident scorer's verdict on raw (its first MAX_MESSAGE_BYTES bytes). */
static int score_remote(const struct address *a, const struct options *o, const char *raw,
                        size_t raw_len, struct verdict *v, char *err)
{
    char head[400], reply[MAX_LINE + 4096 + 1], copy[MAX_LINE + 4096 + 1], *fields[6];
    size_t sent = raw_len < MAX_MESSAGE_BYTES ? raw_len : MAX_MESSAGE_BYTES;
    int head_len, n, k;

    if (o->cost_text != NULL)  /* %.17g reads back as the same double, as repr does */
        head_len = snprintf(head, sizeof head, PROTOCOL " SCORE %lu %.17g%s%s\n",
                            (unsigned long)sent, o->cost_ratio, USER_FIELD(o));
    else
        head_len = snprintf(head, sizeof head, PROTOCOL " SCORE %lu%s%s\n", (unsigned long)sent,
                            USER_FIELD(o));
    if (exchange(a, o, head, (size_t)head_len, raw, sent, reply, sizeof reply, err) != 0)
        return -1;
    strcpy(copy, reply);
    n = split_words(copy, fields, 5);
    for (k = 0; n == 5 && strcmp(fields[0], "OK") == 0 && k < 3; k++) {
        if (strcmp(fields[1], LABELS[k]) == 0 && reply_number(fields[2], &v->log_odds) == 0 &&
            reply_number(fields[3], &v->p_spam) == 0 && v->p_spam >= 0 && v->p_spam <= 1 &&
            reply_threshold(fields[4], &v->threshold) == 0) {
            v->label = LABELS[k];
            v->exit_code = k;
            return 0;
        }
    }
    refused(a, reply, err);
    return -1;
}

static int ping(const struct address *a, const struct options *o)
{
    char reply[MAX_LINE + 4096 + 1], err[ERR_SIZE], head[400], shown[400], *items[MAX_LINE];
    int head_len = snprintf(head, sizeof head, PROTOCOL " PING%s%s\n", USER_FIELD(o)), n, k;
    int ok = 1;
    size_t i;

    if (exchange(a, o, head, (size_t)head_len, "", 0, reply, sizeof reply, err) != 0) {
        fprintf(stderr, "textnb-client: %s\n", err);
        return 1;
    }
    for (i = 0; reply[i] != '\0'; i++)
        if ((unsigned char)reply[i] >= 0x80) /* PONG's items are printable ASCII */
            ok = 0;
    show_bytes(reply, shown, sizeof shown);
    n = split_words(reply, items, MAX_LINE - 1);
    ok = ok && n < MAX_LINE && strcmp(items[0], "PONG") == 0;
    for (k = 1; ok && k < n; k++)
        ok = items[k][0] != '\0';
    if (!ok) {
        fprintf(stderr, "textnb-client: unexpected reply to PING: '%s'\n", shown);
        return 1;
    }
    for (k = 1; k < n; k++)
        printf("%s%s%s", k > 1 ? " " : "", items[k], strchr(items[k], '=') ? "" : "=");
    printf("\n");
    return fflush(stdout) == 0 ? 0 : EXIT_ERROR;
}

/* -- the verdict headers, inserted as textnb/delivery/verdict_headers.py inserts them -------------------- */

enum line_kind { FIELD, MORE, END };

struct header_line {
    size_t start, text_end, stop; /* the line, its text's end, its end with line ending */
    enum line_kind kind;
    size_t name_len;               /* FIELD: the name is raw[start:start + name_len] */
};

/* One line of the header section from start (filter._header_lines): a field (a name of
 * printable ASCII without a colon, then a colon), a continuation or mbox 'From ' line,
 * or the end (a blank line, a line that cannot be a header, or the end of raw). */
static void header_line_at(const unsigned char *raw, size_t n, size_t start,
                           struct header_line *ln)
{
    const unsigned char *nl, *colon;
    size_t len, i;
    ln->start = start;
    ln->kind = END;
    ln->name_len = 0;
    if (start >= n) {
        ln->text_end = ln->stop = n;
        return;
    }
    nl = memchr(raw + start, '\n', n - start);
    if (nl == NULL) {
        ln->text_end = ln->stop = n;
    } else {
        size_t newline = (size_t)(nl - raw);
        ln->stop = newline + 1;
        ln->text_end = newline > start && raw[newline - 1] == '\r' ? newline - 1 : newline;
    }
    len = ln->text_end - start;
    if (len == 0)
        return;
    if (raw[start] == ' ' || raw[start] == '\t' ||
        (len >= 5 && memcmp(raw + start, "From ", 5) == 0)) {
        ln->kind = MORE;
        return;
    }
    colon = memchr(raw + start, ':', len);
    if (colon == NULL)
        return;
    for (i = start; raw + i < colon; i++)
        if (raw[i] < 33 || raw[i] > 126)
            return;
    ln->kind = FIELD;
    ln->name_len = (size_t)(colon - (raw + start));
}

static int same_name(const unsigned char *name, size_t len, const char *wanted)
{
    size_t i;
    if (strlen(wanted) != len)
        return 0;
    for (i = 0; i < len; i++) {
        unsigned char c = name[i];
        if (c >= 'A' && c <= 'Z')
            c = (unsigned char)(c - 'A' + 'a');
        if (c != (unsigned char)wanted[i])
            return 0;
    }
    return 1;
}

static int replaced(const unsigned char *name, size_t len, int spamassassin)
{
    return same_name(name, len, "x-textnb-status") || same_name(name, len, "x-textnb-score") ||
           (spamassassin &&
            (same_name(name, len, "x-spam-flag") || same_name(name, len, "x-spam-status")));
}

/* %.Nf as Python's format writes it (both round the exact binary value; Python
 * writes every NaN as "nan", C may write "-nan"). */
static const char *fixed(char *out, size_t size, double x, int digits)
{
    if (isnan(x))
        snprintf(out, size, "nan");
    else
        snprintf(out, size, "%.*f", digits, x);
    return out;
}

#define MAX_FIELDS 4
#define FIELD_SIZE 1400 /* three numbers of up to 320 characters (%.3f of 1e308) and text */

/* The header lines that carry a verdict, without line endings (filter.verdict_fields). */
static size_t verdict_fields(const struct verdict *v, int spamassassin,
                             char fields[MAX_FIELDS][FIELD_SIZE])
{
    char a[400], b[400], c[400];
    size_t n = 0;
    int is_spam = v->exit_code == 0;
    snprintf(fields[n++], FIELD_SIZE, "X-TextNB-Status: %s", v->label);
    snprintf(fields[n++], FIELD_SIZE,
             "X-TextNB-Score: log-odds=%s; p=%s; threshold=%s; version=" TEXTNB_VERSION,
             fixed(a, sizeof a, v->log_odds, 3), fixed(b, sizeof b, v->p_spam, 6),
             fixed(c, sizeof c, v->threshold, 3));
    if (spamassassin) {
        if (is_spam)
            snprintf(fields[n++], FIELD_SIZE, "X-Spam-Flag: YES");
        snprintf(fields[n++], FIELD_SIZE,
                 "X-Spam-Status: %s, score=%s required=%s tests=TEXTNB version=textnb-"
                 TEXTNB_VERSION, is_spam ? "Yes" : "No", fixed(a, sizeof a, v->log_odds, 1),
                 fixed(b, sizeof b, v->threshold, 1));
    }
    return n;
}

/* The message with fields added at the end of its header section and earlier fields of
 * textnb's names dropped (filter.add_verdict / add_headers), written to out. */
static void write_with_fields(FILE *out, const char *message, size_t n,
                              char fields[MAX_FIELDS][FIELD_SIZE], size_t n_fields,
                              int spamassassin)
{
    const unsigned char *raw = (const unsigned char *)message;
    struct header_line ln;
    const char *eol = "";
    size_t eol_len = 0, pos = 0, copy_from = 0, head_len = 0, end, i;
    char last_byte = 0;
    int dropping = 0;

    for (;;) {
        header_line_at(raw, n, pos, &ln);
        if (ln.kind == END)
            break;
        if (ln.stop > ln.text_end) { /* the last header line's ending, for the new fields */
            eol = message + ln.text_end;
            eol_len = ln.stop - ln.text_end;
        }
        if (ln.kind == FIELD)
            dropping = replaced(raw + ln.start, ln.name_len, spamassassin);
        else if (ln.text_end - ln.start >= 5 && memcmp(raw + ln.start, "From ", 5) == 0)
            dropping = 0;
        if (dropping) {
            if (ln.start > copy_from) {
                fwrite(message + copy_from, 1, ln.start - copy_from, out);
                head_len += ln.start - copy_from;
                last_byte = message[ln.start - 1];
            }
            copy_from = ln.stop;
        }
        pos = ln.stop;
    }
    end = ln.start;
    if (eol_len == 0 && ln.stop > ln.text_end) { /* else the ending of the line at end */
        eol = message + ln.text_end;
        eol_len = ln.stop - ln.text_end;
    }
    if (eol_len == 0) { /* else that of the message's first line */
        const char *nl = memchr(message, '\n', n);
        int crlf = nl != NULL && nl > message && nl[-1] == '\r';
        eol = crlf ? "\r\n" : "\n";
        eol_len = crlf ? 2 : 1;
    }
    if (end > copy_from) {
        fwrite(message + copy_from, 1, end - copy_from, out);
        head_len += end - copy_from;
        last_byte = message[end - 1];
    }
    if (head_len > 0 && last_byte != '\n') /* the message stopped inside its header */
        fwrite(eol, 1, eol_len, out);
    for (i = 0; i < n_fields; i++) {
        fputs(fields[i], out);
        fwrite(eol, 1, eol_len, out);
    }
    fwrite(message + end, 1, n - end, out);
}

/* -- the in-process fallback: `textnb filter` as a child ------------------------------- */

/* Run `$TEXTNB_COMMAND filter ...` with raw on its stdin and its stdout in out.
 * RETURNS the wait status, or -1 (err filled) when it could not be run at all. */
static int run_fallback(const struct options *o, const char *raw, size_t raw_len,
                        struct buffer *out, const char *command, char *err)
{
    char cost[64];
    const char *argv[8];
    int to_child[2], from_child[2], argc = 0, status;
    size_t fed = 0;
    pid_t pid;

    argv[argc++] = command;
    argv[argc++] = "filter";
    if (o->model != NULL) {
        argv[argc++] = "--model";
        argv[argc++] = o->model;
    }
    if (o->cost_text != NULL) {
        snprintf(cost, sizeof cost, "%.17g", o->cost_ratio);
        argv[argc++] = "--cost-ratio";
        argv[argc++] = cost;
    }
    if (o->spamassassin)
        argv[argc++] = "--spamassassin";
    argv[argc] = NULL;

    if (pipe(to_child) != 0) {
        snprintf(err, ERR_SIZE, "cannot run '%s filter': %s", command, strerror(errno));
        return -1;
    }
    if (pipe(from_child) != 0) {
        snprintf(err, ERR_SIZE, "cannot run '%s filter': %s", command, strerror(errno));
        close(to_child[0]);
        close(to_child[1]);
        return -1;
    }
    fflush(stderr);
    pid = fork();
    if (pid < 0) {
        snprintf(err, ERR_SIZE, "cannot run '%s filter': %s", command, strerror(errno));
        close(to_child[0]);
        close(to_child[1]);
        close(from_child[0]);
        close(from_child[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(to_child[0], 0);
        dup2(from_child[1], 1);
        close(to_child[0]);
        close(to_child[1]);
        close(from_child[0]);
        close(from_child[1]);
        signal(SIGPIPE, SIG_DFL);
        execvp(command, (char *const *)argv);
        fprintf(stderr, "textnb-client: cannot run '%s': %s\n", command, strerror(errno));
        _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    fcntl(to_child[1], F_SETFL, O_NONBLOCK);
    if (raw_len == 0) {
        close(to_child[1]);
        to_child[1] = -1;
    }
    /* Feed and drain at once: either pipe filling up must not block the other. */
    for (;;) {
        struct pollfd pfd[2];
        int n_fd = 0;
        pfd[n_fd].fd = from_child[0];
        pfd[n_fd++].events = POLLIN;
        if (to_child[1] >= 0) {
            pfd[n_fd].fd = to_child[1];
            pfd[n_fd++].events = POLLOUT;
        }
        if (poll(pfd, (nfds_t)n_fd, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (n_fd == 2 && pfd[1].revents) {
            ssize_t put = write(to_child[1], raw + fed, raw_len - fed);
            if (put > 0)
                fed += (size_t)put;
            if ((put < 0 && errno != EAGAIN && errno != EINTR) || fed == raw_len) {
                close(to_child[1]); /* all fed, or the child stopped reading */
                to_child[1] = -1;
            }
        }
        if (pfd[0].revents) {
            ssize_t got;
            if (buffer_reserve(out, 65536) != 0)
                break;
            got = read(from_child[0], out->data + out->len, out->cap - out->len);
            if (got > 0)
                out->len += (size_t)got;
            else if (got == 0 || errno != EINTR)
                break;
        }
    }
    if (to_child[1] >= 0)
        close(to_child[1]);
    close(from_child[0]);
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            snprintf(err, ERR_SIZE, "lost the '%s filter' child: %s", command, strerror(errno));
            return -1;
        }
    return status;
}

/* Whether the fallback's output is the message with a verdict for exit code `code`:
 * its verdict lines (the first X-TextNB-Status line and those after it), inserted into
 * raw here, must give its output exactly. Anything else (a traceback's empty output, a
 * message cut short) is not trusted. */
static int verdict_output(const char *raw, size_t raw_len, const struct buffer *out, int code,
                          int spamassassin)
{
    static char fields[MAX_FIELDS][FIELD_SIZE];
    char *rendered = NULL;
    size_t rendered_len = 0, n_fields, i, k, at = 0;
    int found = 0, same;
    FILE *memory;

    if (code < 0 || code > 2)
        return 0;
    n_fields = 2 + (spamassassin ? (code == 0 ? 2 : 1) : 0);
    for (i = 0; i + 17 <= out->len && !found; i++)
        if ((i == 0 || out->data[i - 1] == '\n') &&
            memcmp(out->data + i, "X-TextNB-Status: ", 17) == 0) {
            found = 1;
            at = i;
        }
    if (!found)
        return 0;
    for (k = 0; k < n_fields; k++) {
        const char *nl = memchr(out->data + at, '\n', out->len - at);
        size_t len;
        if (nl == NULL)
            return 0;
        len = (size_t)(nl - (out->data + at));
        if (len > 0 && nl[-1] == '\r')
            len--;
        if (len >= FIELD_SIZE)
            return 0;
        memcpy(fields[k], out->data + at, len);
        fields[k][len] = '\0';
        at = (size_t)(nl - out->data) + 1;
    }
    if (strcmp(fields[0] + 17, LABELS[code]) != 0)
        return 0;
    memory = open_memstream(&rendered, &rendered_len);
    if (memory == NULL)
        return 0;
    write_with_fields(memory, raw, raw_len, fields, n_fields, spamassassin);
    if (fclose(memory) != 0) {
        free(rendered);
        return 0;
    }
    same = rendered_len == out->len && memcmp(rendered, out->data, out->len) == 0;
    free(rendered);
    return same;
}

/* -- the filter ------------------------------------------------------------------------- */

static int write_message(const char *data, size_t len)
{
    if (write_all(1, data, len) != 0) {
        fprintf(stderr, "textnb: error: cannot write the message: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

/* Deliver the message unchanged after a fault; exit 3, or 0 with --always-exit-0. */
static int pass_through(const struct options *o, const struct buffer *raw)
{
    if (write_message(raw->data, raw->len) != 0)
        return EXIT_ERROR;
    return o->always_exit_0 ? 0 : EXIT_ERROR;
}

static int filter(const struct options *o, const struct address *a)
{
    static char empty[1];
    struct buffer raw = {NULL, 0, 0}, out = {NULL, 0, 0};
    struct verdict v;
    char err[ERR_SIZE], why[ERR_SIZE + 64];
    const char *command = getenv("TEXTNB_COMMAND");
    int status;

    if (read_all(0, &raw) != 0) {
        int saved = errno;
        fprintf(stderr, "textnb: error: cannot read the message: %s\n", strerror(saved));
        if (saved == ENOMEM) { /* deliver what was read and the rest unchanged */
            if (write_all(1, raw.data, raw.len) == 0)
                copy_through();
        }
        return EXIT_ERROR;
    }
    if (raw.data == NULL)
        raw.data = empty;
    if (score_remote(a, o, raw.data, raw.len, &v, err) == 0) {
        static char fields[MAX_FIELDS][FIELD_SIZE];
        size_t n_fields = verdict_fields(&v, o->spamassassin, fields);
        write_with_fields(stdout, raw.data, raw.len, fields, n_fields, o->spamassassin);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            fprintf(stderr, "textnb: error: cannot write the message: %s\n", strerror(errno));
            return EXIT_ERROR;
        }
        return o->always_exit_0 ? 0 : v.exit_code;
    }
    if (o->no_fallback) {
        fprintf(stderr, "textnb: error: %s; message passed through unchanged\n", err);
        return pass_through(o, &raw);
    }
    fprintf(stderr, "textnb: warning: resident scorer unavailable (%s); scoring in process\n", err);
    if (command == NULL || command[0] == '\0')
        command = TEXTNB_COMMAND;
    status = run_fallback(o, raw.data, raw.len, &out, command, err);
    if (status != -1 && WIFEXITED(status) &&
        verdict_output(raw.data, raw.len, &out, WEXITSTATUS(status), o->spamassassin)) {
        if (write_message(out.data, out.len) != 0)
            return EXIT_ERROR;
        return o->always_exit_0 ? 0 : WEXITSTATUS(status);
    }
    if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == EXIT_ERROR)
        return pass_through(o, &raw); /* textnb filter has said why on stderr */
    if (status == -1)
        snprintf(why, sizeof why, "%s", err);
    else if (WIFSIGNALED(status))
        snprintf(why, sizeof why, "'%s filter' was killed by signal %d", command,
                 WTERMSIG(status));
    else if (WIFEXITED(status) && WEXITSTATUS(status) <= 2)
        snprintf(why, sizeof why, "'%s filter' exited %d without a verdict", command,
                 WEXITSTATUS(status));
    else
        snprintf(why, sizeof why, "'%s filter' failed (exit %d)", command,
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    fprintf(stderr, "textnb: error: in-process scoring: %s; message passed through unchanged\n",
            why);
    return pass_through(o, &raw);
}

/* --learn / --forget: the message on stdin to the scorer's ledger (textnb.delivery.client.run_learn). */
static int learn(const struct options *o, const struct address *a)
{
    static char empty[1];
    struct buffer raw = {NULL, 0, 0};
    char head[400], reply[MAX_LINE + 4096 + 1], copy[MAX_LINE + 4096 + 1], err[ERR_SIZE];
    char what[32], *fields[4];
    size_t sent;
    int head_len, n, done;

    snprintf(what, sizeof what, o->learn ? "learned as %s" : "forgotten", o->learn);
    if (read_all(0, &raw) != 0) {
        fprintf(stderr, "textnb-client: error: message not %s: cannot read it: %s\n", what,
                strerror(errno));
        return EXIT_ERROR;
    }
    if (raw.data == NULL)
        raw.data = empty;
    sent = raw.len < MAX_MESSAGE_BYTES ? raw.len : MAX_MESSAGE_BYTES;
    if (o->learn)
        head_len = snprintf(head, sizeof head, PROTOCOL " LEARN %s %lu%s%s\n", o->learn,
                            (unsigned long)sent, USER_FIELD(o));
    else
        head_len = snprintf(head, sizeof head, PROTOCOL " FORGET %lu%s%s\n", (unsigned long)sent,
                            USER_FIELD(o));
    switch (exchange(a, o, head, (size_t)head_len, raw.data, sent, reply, sizeof reply, err)) {
    case 0:
        break;
    case NO_ANSWER:
        fprintf(stderr, "textnb-client: error: message perhaps not %s: %s%s\n", what, err,
                NO_ANSWER_NOTE);
        return EXIT_ERROR;
    default:
        fprintf(stderr, "textnb-client: error: message not %s: %s\n", what, err);
        return EXIT_ERROR;
    }
    strcpy(copy, reply);
    n = split_words(copy, fields, 3);
    if (o->learn)
        done = n == 3 && strcmp(fields[0], "LEARNED") == 0 &&
               (strcmp(fields[1], "spam") == 0 || strcmp(fields[1], "ham") == 0) &&
               reply_word(fields[2]);
    else
        done = n == 2 && strcmp(fields[0], "FORGOTTEN") == 0 && reply_word(fields[1]);
    if (done) {
        printf("%s %s\n", o->learn ? "learned" : "forgotten", strchr(reply, ' ') + 1);
        return fflush(stdout) == 0 ? 0 : EXIT_ERROR;
    }
    if (strncmp(reply, "ERROR ", 6) == 0) {
        /* the whole reason, as the Python client prints it (a score error is cut at 80) */
        char shown[MAX_LINE * 4 + 8];
        show_bytes_upto(reply + 6, shown, sizeof shown, MAX_LINE);
        fprintf(stderr, "textnb-client: error: message not %s: the scorer at %s said: %s\n", what,
                a->shown, shown);
    } else {
        refused(a, reply, err);
        fprintf(stderr, "textnb-client: error: message not %s: %s\n", what, err);
    }
    return EXIT_ERROR;
}

int main(int argc, char **argv)
{
    struct options o;
    struct address a;
    char err[ERR_SIZE];
    char *spec;

    /* A closed stdout or a scorer that hung up is an error to report, not a death. */
    signal(SIGPIPE, SIG_IGN);
    memset(&o, 0, sizeof o);
    if (parse_args(argc, argv, &o, err) != 0) {
        fprintf(stderr, "textnb-client: error: %s\n%s", err, USAGE);
        /* Still a filter: a bad option must not eat the message either. */
        if (!isatty(0))
            copy_through();
        return EXIT_ERROR;
    }
    if (o.help) {
        fputs(USAGE, stdout);
        return 0;
    }
    spec = o.server != NULL && o.server[0] != '\0' ? concat(o.server, "", "") : default_socket();
    parse_address(spec, &a);
    if (o.ping)
        return ping(&a, &o);
    if (o.learn != NULL || o.forget)
        return learn(&o, &a);
    return filter(&o, &a);
}
