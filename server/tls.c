/* znbd server: TLS sessions with GnuTLS on buffers (see tls.h).
 *
 * Credentials follow nbdkit-tls(1): --tls-certificates DIR holds
 * ca-cert.pem (the CA that signed client certificates, needed by
 * --tls-verify-peer), server-cert.pem, server-key.pem and optionally
 * ca-crl.pem; --tls-psk FILE is psktool(1)'s format, one IDENTITY:HEXKEY
 * a line.  The PSK file is read once at start-up, so a bad line stops
 * start-up with its line number instead of failing handshakes later.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "buf.h"
#include "tls.h"

/* GnuTLS priorities: its defaults (TLS 1.2 and 1.3, as the NBD spec asks),
 * with the PSK key exchanges added when a PSK file is given (they are not
 * in NORMAL).  On a CPU with AES instructions the server's order decides
 * and ChaCha20-Poly1305 goes last: clients such as libnbd list it first,
 * and in software it costs about 16 times AES-GCM here (gnutls-cli
 * --benchmark-ciphers: 0.31 against 5 GB/s), which made a 4 KiB READ
 * over TLS cost 4 times the plain server's CPU instead of 1.2 times
 * (bench/tls.sh). */
#define PRIO_BASE "NORMAL"
#define PRIO_AES_FIRST                                                         \
  ":%SERVER_PRECEDENCE:-CHACHA20-POLY1305:+CHACHA20-POLY1305"
#define PRIO_PSK_KX ":+ECDHE-PSK:+DHE-PSK:+PSK"

static bool
cpu_has_aes(void)
{
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_AES);
#else
  return false; /* elsewhere GnuTLS's own order */
#endif
}

struct psk {
  char *id;
  uint8_t *key;
  size_t keylen;
};

static struct {
  bool verbose, verify_peer;
  gnutls_certificate_credentials_t x509;
  gnutls_psk_server_credentials_t psk;
  gnutls_priority_t prio;
  struct psk *keys;
  size_t nkeys;
} G;

struct tls {
  gnutls_session_t s;
  struct buf rx; /* ciphertext received; GnuTLS has taken [0, rx_head) */
  size_t rx_head;
  struct buf fill, tx; /* records written / being sent */
  char psk_id[128];    /* the PSK identity the client gave, for the log */
  bool psk_known;      /* ... and it is in the PSK file */
};

static void
vlog(const char *fmt, const char *a, const char *b)
{
  if (!G.verbose)
    return;
  fprintf(stderr, "znbd: TLS: ");
  fprintf(stderr, fmt, a, b);
  fprintf(stderr, "\n");
}

/* ---- start-up ---- */

static int
hexval(int ch)
{
  if (ch >= '0' && ch <= '9')
    return ch - '0';
  if (ch >= 'a' && ch <= 'f')
    return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F')
    return ch - 'A' + 10;
  return -1;
}

/* One line IDENTITY:HEXKEY of the PSK file into K; NULL or the fault. */
static const char *
psk_parse_line(char *line, struct psk *k)
{
  char *colon = strchr(line, ':');
  if (!colon)
    return "no ':' between the identity and the key";
  *colon = 0;
  const char *hex = colon + 1;
  size_t n = strlen(hex);
  if (colon == line)
    return "empty identity";
  if (n == 0 || n % 2)
    return "the key is not an even number of hex digits";
  if (!(k->key = malloc(n / 2)))
    return "out of memory";
  for (size_t i = 0; i < n / 2; i++) {
    int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      free(k->key);
      k->key = NULL;
      return "the key is not hex digits";
    }
    k->key[i] = (uint8_t)(hi << 4 | lo);
  }
  k->keylen = n / 2;
  if (!(k->id = strdup(line))) {
    free(k->key);
    k->key = NULL;
    return "out of memory";
  }
  return NULL;
}

static int
psk_load(const char *path, char *err, size_t errlen)
{
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "--tls-psk %s: %s", path, strerror(errno));
    return -1;
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  unsigned lineno = 0;
  int rc = 0;
  while ((n = getline(&line, &cap, f)) != -1) {
    lineno++;
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
      line[--n] = 0;
    if (n == 0)
      continue;
    struct psk *v = realloc(G.keys, (G.nkeys + 1) * sizeof *v);
    if (!v) {
      snprintf(err, errlen, "--tls-psk %s: out of memory", path);
      rc = -1;
      break;
    }
    G.keys = v;
    const char *why = psk_parse_line(line, &G.keys[G.nkeys]);
    if (why) {
      snprintf(err, errlen,
               "--tls-psk %s: line %u: %s (want IDENTITY:HEXKEY, as psktool "
               "writes)",
               path, lineno, why);
      rc = -1;
      break;
    }
    G.nkeys++;
  }
  if (rc == 0 && ferror(f)) {
    snprintf(err, errlen, "--tls-psk %s: %s", path, strerror(errno));
    rc = -1;
  }
  if (rc == 0 && G.nkeys == 0) {
    snprintf(err, errlen, "--tls-psk %s: no IDENTITY:HEXKEY line", path);
    rc = -1;
  }
  free(line);
  fclose(f);
  return rc;
}

/* GnuTLS asks for the key of the identity the client gave. */
static int
psk_lookup(gnutls_session_t s, const char *id, gnutls_datum_t *key)
{
  struct tls *t = gnutls_session_get_ptr(s);
  snprintf(t->psk_id, sizeof t->psk_id, "%s", id);
  for (size_t i = 0; i < G.nkeys; i++) {
    if (strcmp(G.keys[i].id, id) != 0)
      continue;
    key->data = gnutls_malloc(G.keys[i].keylen);
    if (!key->data)
      return -1;
    memcpy(key->data, G.keys[i].key, G.keys[i].keylen);
    key->size = (unsigned)G.keys[i].keylen;
    t->psk_known = true;
    return 0;
  }
  vlog("unknown PSK identity '%s'%s", id, "");
  return -1;
}

/* DIR/NAME in BUF; 0 if readable, else -1 with errno. */
static int
cert_file(const char *dir, const char *name, char *buf, size_t len)
{
  snprintf(buf, len, "%s/%s", dir, name);
  int fd = open(buf, O_RDONLY | O_CLOEXEC);
  if (fd == -1)
    return -1;
  close(fd);
  return 0;
}

static int
x509_load(const char *dir, bool verify_peer, char *err, size_t errlen)
{
  char cert[4096], key[4096], ca[4096], crl[4096];
  int r;
  if (cert_file(dir, "server-cert.pem", cert, sizeof cert) == -1 ||
      cert_file(dir, "server-key.pem", key, sizeof key) == -1) {
    const char *which = access(cert, R_OK) == 0 ? key : cert;
    snprintf(err, errlen, "--tls-certificates %s: %s: %s", dir, which,
             strerror(errno));
    return -1;
  }
  if ((r = gnutls_certificate_allocate_credentials(&G.x509)) < 0)
    goto gnutls_fail;
  bool have_ca = cert_file(dir, "ca-cert.pem", ca, sizeof ca) == 0;
  if (!have_ca && errno != ENOENT) {
    snprintf(err, errlen, "--tls-certificates %s: %s: %s", dir, ca,
             strerror(errno));
    return -1;
  }
  if (verify_peer && !have_ca) {
    snprintf(err, errlen,
             "--tls-verify-peer: %s: %s (the CA that signs client "
             "certificates)",
             ca, strerror(ENOENT));
    return -1;
  }
  if (have_ca && gnutls_certificate_set_x509_trust_file(
                     G.x509, ca, GNUTLS_X509_FMT_PEM) < 0) {
    snprintf(err, errlen, "--tls-certificates %s: %s: not a PEM certificate",
             dir, ca);
    return -1;
  }
  if (cert_file(dir, "ca-crl.pem", crl, sizeof crl) == 0) {
    if ((r = gnutls_certificate_set_x509_crl_file(G.x509, crl,
                                                  GNUTLS_X509_FMT_PEM)) < 0) {
      snprintf(err, errlen, "--tls-certificates %s: %s: %s", dir, crl,
               gnutls_strerror(r));
      return -1;
    }
  } else if (errno != ENOENT) {
    snprintf(err, errlen, "--tls-certificates %s: %s: %s", dir, crl,
             strerror(errno));
    return -1;
  }
  if ((r = gnutls_certificate_set_x509_key_file(G.x509, cert, key,
                                                GNUTLS_X509_FMT_PEM)) < 0) {
    snprintf(err, errlen, "--tls-certificates %s: %s with %s: %s", dir, cert,
             key, gnutls_strerror(r));
    return -1;
  }
  gnutls_certificate_set_known_dh_params(G.x509, GNUTLS_SEC_PARAM_MEDIUM);
  return 0;

gnutls_fail:
  snprintf(err, errlen, "--tls-certificates %s: %s", dir, gnutls_strerror(r));
  return -1;
}

int
tls_setup(struct tls_opts *o, char *err, size_t errlen)
{
  int r;
  G.verbose = o->verbose;
  G.verify_peer = o->verify_peer;
  if (o->mode == TLS_OFF) {
    if (o->certs_dir || o->psk_file || o->verify_peer)
      fprintf(stderr, "znbd: note: --tls-certificates, --tls-psk and "
                      "--tls-verify-peer have no effect with --tls=off\n");
    return 0;
  }
  if (!o->certs_dir && !o->psk_file) {
    if (o->mode == TLS_REQUIRE) {
      snprintf(err, errlen,
               "--tls=require: give --tls-certificates=DIR or "
               "--tls-psk=FILE (nothing to serve TLS with)");
      return -1;
    }
    fprintf(stderr, "znbd: note: --tls=on without --tls-certificates or "
                    "--tls-psk: TLS disabled\n");
    o->mode = TLS_OFF;
    return 0;
  }
  if (o->verify_peer && !o->certs_dir) {
    snprintf(err, errlen,
             "--tls-verify-peer needs --tls-certificates=DIR (client "
             "certificates are checked against its ca-cert.pem)");
    return -1;
  }
  if ((r = gnutls_global_init()) < 0) {
    snprintf(err, errlen, "--tls: GnuTLS: %s", gnutls_strerror(r));
    return -1;
  }
  if (o->psk_file) {
    if (psk_load(o->psk_file, err, errlen) == -1)
      return -1;
    if ((r = gnutls_psk_allocate_server_credentials(&G.psk)) < 0) {
      snprintf(err, errlen, "--tls-psk: %s", gnutls_strerror(r));
      return -1;
    }
    gnutls_psk_set_server_credentials_function(G.psk, psk_lookup);
    gnutls_psk_set_server_known_dh_params(G.psk, GNUTLS_SEC_PARAM_MEDIUM);
  }
  if (o->certs_dir && x509_load(o->certs_dir, o->verify_peer, err, errlen))
    return -1;
  char prio[200];
  snprintf(prio, sizeof prio, "%s%s%s", PRIO_BASE,
           cpu_has_aes() ? PRIO_AES_FIRST : "", o->psk_file ? PRIO_PSK_KX : "");
  if ((r = gnutls_priority_init(&G.prio, prio, NULL)) < 0) {
    snprintf(err, errlen, "--tls: GnuTLS priorities: %s", gnutls_strerror(r));
    return -1;
  }
  return 0;
}

void
tls_cleanup(void)
{
  if (G.prio)
    gnutls_priority_deinit(G.prio);
  if (G.x509)
    gnutls_certificate_free_credentials(G.x509);
  if (G.psk)
    gnutls_psk_free_server_credentials(G.psk);
  for (size_t i = 0; i < G.nkeys; i++) {
    /* Keys do not outlive the process in freed memory. */
    memset(G.keys[i].key, 0, G.keys[i].keylen);
    free(G.keys[i].key);
    free(G.keys[i].id);
  }
  free(G.keys);
  memset(&G, 0, sizeof G);
}

/* ---- transport on buffers ---- */

static ssize_t
push(gnutls_transport_ptr_t p, const void *data, size_t len)
{
  struct tls *t = p;
  uint8_t *q = buf_try_reserve(&t->fill, len);
  if (!q) {
    gnutls_transport_set_errno(t->s, ENOMEM);
    return -1;
  }
  memcpy(q, data, len);
  buf_commit(&t->fill, len);
  return (ssize_t)len;
}

static ssize_t
pull(gnutls_transport_ptr_t p, void *data, size_t len)
{
  struct tls *t = p;
  size_t have = t->rx.len - t->rx_head;
  if (have == 0) {
    gnutls_transport_set_errno(t->s, EAGAIN);
    return -1;
  }
  if (len > have)
    len = have;
  memcpy(data, t->rx.p + t->rx_head, len);
  t->rx_head += len;
  return (ssize_t)len;
}

/* GnuTLS asks whether pull would give bytes (non-blocking: no wait). */
static int
pull_timeout(gnutls_transport_ptr_t p, unsigned ms)
{
  (void)ms;
  const struct tls *t = p;
  return t->rx.len > t->rx_head;
}

struct tls *
tls_new(void)
{
  struct tls *t = calloc(1, sizeof *t);
  int r;
  if (!t)
    return NULL;
  if ((r = gnutls_init(&t->s, GNUTLS_SERVER | GNUTLS_NONBLOCK)) < 0) {
    vlog("session: %s%s", gnutls_strerror(r), "");
    free(t);
    return NULL;
  }
  if ((r = gnutls_priority_set(t->s, G.prio)) < 0 ||
      (G.x509 && (r = gnutls_credentials_set(t->s, GNUTLS_CRD_CERTIFICATE,
                                             G.x509)) < 0) ||
      (G.psk &&
       (r = gnutls_credentials_set(t->s, GNUTLS_CRD_PSK, G.psk)) < 0)) {
    vlog("session: %s%s", gnutls_strerror(r), "");
    tls_free(t);
    return NULL;
  }
  if (G.verify_peer) {
    /* The client must present a certificate signed by ca-cert.pem; the
     * handshake fails otherwise (no host name: clients have none). */
    gnutls_certificate_server_set_request(t->s, GNUTLS_CERT_REQUIRE);
    gnutls_session_set_verify_cert(t->s, NULL, 0);
  }
  gnutls_transport_set_ptr(t->s, t);
  gnutls_session_set_ptr(t->s, t);
  gnutls_transport_set_push_function(t->s, push);
  gnutls_transport_set_pull_function(t->s, pull);
  gnutls_transport_set_pull_timeout_function(t->s, pull_timeout);
  /* The worker times the handshake out itself. */
  gnutls_handshake_set_timeout(t->s, 0);
  return t;
}

void
tls_free(struct tls *t)
{
  if (!t)
    return;
  if (t->s)
    gnutls_deinit(t->s);
  buf_free(&t->rx);
  buf_free(&t->fill);
  buf_free(&t->tx);
  free(t);
}

uint8_t *
tls_rx_space(struct tls *t, size_t min, size_t *len)
{
  if (t->rx_head == t->rx.len) {
    t->rx_head = t->rx.len = 0;
  } else if (t->rx_head > 0 && t->rx.cap - t->rx.len < min) {
    memmove(t->rx.p, t->rx.p + t->rx_head, t->rx.len - t->rx_head);
    t->rx.len -= t->rx_head;
    t->rx_head = 0;
  }
  uint8_t *p = buf_try_reserve(&t->rx, min);
  if (!p)
    return NULL;
  *len = t->rx.cap - t->rx.len;
  return p;
}

void
tls_rx_commit(struct tls *t, size_t n)
{
  buf_commit(&t->rx, n);
}

size_t
tls_rx_pending(const struct tls *t)
{
  return t->rx.len - t->rx_head;
}

bool
tls_rx_put(struct tls *t, const void *p, size_t len)
{
  size_t room;
  if (len == 0)
    return true;
  uint8_t *q = tls_rx_space(t, len, &room);
  if (!q)
    return false;
  memcpy(q, p, len);
  tls_rx_commit(t, len);
  return true;
}

/* A failed session: why, with -v; for a PSK or certificate refusal the
 * client's identity if it gave one. */
static void
log_failure(struct tls *t, const char *what, int r)
{
  char who[300] = "";
  if (t->psk_id[0])
    snprintf(who, sizeof who, " (PSK identity '%s'%s)", t->psk_id,
             t->psk_known ? ": not the key of --tls-psk, or a damaged record"
                          : ": not in --tls-psk");
  else if (G.verify_peer && r == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR)
    snprintf(who, sizeof who, " (client certificate not signed by the CA)");
  else if (G.verify_peer && r == GNUTLS_E_NO_CERTIFICATE_FOUND)
    snprintf(who, sizeof who, " (the client sent no certificate)");
  char msg[400];
  snprintf(msg, sizeof msg, "%s%s", gnutls_strerror(r), who);
  vlog("%s failed: %s", what, msg);
}

int
tls_handshake(struct tls *t)
{
  for (;;) {
    int r = gnutls_handshake(t->s);
    if (r == 0) {
      if (G.verbose) {
        char *desc = gnutls_session_get_desc(t->s);
        vlog("handshake done: %s%s", desc ? desc : "", "");
        gnutls_free(desc);
      }
      return 1;
    }
    if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
      return 0;
    if (!gnutls_error_is_fatal(r))
      continue; /* a warning alert: go on */
    log_failure(t, "handshake", r);
    /* Tell the client why, as far as TLS can (the alert goes out with
     * the fill buffer before the connection closes). */
    gnutls_alert_send_appropriate(t->s, r);
    return -1;
  }
}

ssize_t
tls_read(struct tls *t, void *p, size_t n)
{
  for (;;) {
    ssize_t r = gnutls_record_recv(t->s, p, n);
    if (r > 0)
      return r;
    if (r == 0)
      return -1; /* close_notify */
    if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
      return 0;
    if (r == GNUTLS_E_REHANDSHAKE) {
      /* A TLS 1.2 renegotiation: not offered, refused politely. */
      gnutls_alert_send(t->s, GNUTLS_AL_WARNING, GNUTLS_A_NO_RENEGOTIATION);
      continue;
    }
    if (!gnutls_error_is_fatal((int)r))
      continue;
    log_failure(t, "receive", (int)r);
    return -2;
  }
}

bool
tls_read_pending(struct tls *t)
{
  return gnutls_record_check_pending(t->s) > 0;
}

/* Pieces at least this long are encrypted straight from where they are
 * (store bytes of a READ); shorter ones are gathered by GnuTLS's cork
 * into shared records. */
#define DIRECT_MIN 16384

void
tls_write_begin(struct tls *t)
{
  gnutls_record_cork(t->s);
}

int
tls_write(struct tls *t, const void *p, size_t n)
{
  const uint8_t *q = p;
  if (n >= DIRECT_MIN && gnutls_record_uncork(t->s, GNUTLS_RECORD_WAIT) < 0)
    return -1;
  while (n) {
    ssize_t r = gnutls_record_send(t->s, q, n);
    if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
      continue;
    if (r < 0) {
      log_failure(t, "send", (int)r);
      return -1;
    }
    q += r;
    n -= (size_t)r;
  }
  if (q - (const uint8_t *)p >= DIRECT_MIN)
    gnutls_record_cork(t->s);
  return 0;
}

int
tls_write_end(struct tls *t)
{
  int r = gnutls_record_uncork(t->s, GNUTLS_RECORD_WAIT);
  if (r < 0) {
    log_failure(t, "send", r);
    return -1;
  }
  return 0;
}

size_t
tls_tx_fill_len(const struct tls *t)
{
  return t->fill.len;
}

const uint8_t *
tls_tx_take(struct tls *t, size_t *len)
{
  if (t->tx.len == 0) {
    struct buf b = t->tx;
    t->tx = t->fill;
    t->fill = b;
  }
  *len = t->tx.len;
  return t->tx.p;
}

size_t
tls_tx_len(const struct tls *t)
{
  return t->tx.len;
}

void
tls_tx_done(struct tls *t)
{
  t->tx.len = 0;
}

void
tls_give_back(struct tls *t, size_t keep, bool rx_idle)
{
  if (t->tx.len == 0 && t->tx.cap > keep)
    buf_free(&t->tx);
  if (t->fill.len == 0 && t->fill.cap > keep)
    buf_free(&t->fill);
  if (rx_idle && t->rx_head == t->rx.len && t->rx.cap > keep) {
    buf_free(&t->rx);
    t->rx_head = 0;
  }
}
