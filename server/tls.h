/* znbd server: TLS with GnuTLS on a connection's buffers (--tls,
 * --tls-certificates, --tls-psk, --tls-verify-peer; nbdkit's names and
 * meanings, see man/znbd.pod).
 *
 * No I/O here either: the session's push and pull callbacks move TLS
 * records between GnuTLS and two byte buffers, filled and drained by the
 * worker's io_uring receives and sends.  Ciphertext received goes into
 * the receive buffer (tls_rx_space, tls_rx_commit); plaintext comes out
 * of tls_read().  Plaintext to send goes in by tls_write() and comes out
 * as records in the fill buffer, which tls_tx_take() swaps into the
 * send buffer: records GnuTLS writes while a send is in flight (a
 * handshake message, an alert) go to the fill buffer, never into bytes
 * the kernel is reading.
 */
#ifndef ZNBD_SERVER_TLS_H
#define ZNBD_SERVER_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"

/* The command line's TLS options. */
struct tls_opts {
  enum tls_mode mode;
  const char *certs_dir; /* --tls-certificates DIR, or NULL */
  const char *psk_file;  /* --tls-psk FILE, or NULL */
  bool verify_peer;      /* --tls-verify-peer */
  bool verbose;          /* -v: log handshake failures and refusals */
};

/* Check and load the credentials O names, once, before serving.  0, or
 * -1 with the reason (naming the option and the file) in ERR: a missing
 * or unreadable certificate, key or PSK file, a PSK file line that is not
 * IDENTITY:HEXKEY, --tls=require with neither certificates nor PSK,
 * --tls-verify-peer without certificates and a CA.  --tls=on with nothing
 * to load turns TLS off with a note on stderr (O->mode becomes TLS_OFF),
 * as nbdkit does. */
int tls_setup(struct tls_opts *o, char *err, size_t errlen);
/* Free what tls_setup() loaded. */
void tls_cleanup(void);

/* A connection's TLS session (server side, non-blocking). */
struct tls;
/* A new session with the loaded credentials, or NULL (ENOMEM or a
 * GnuTLS failure, logged with -v). */
struct tls *tls_new(void);
void tls_free(struct tls *t);

/* Room for at least MIN bytes of ciphertext at the end of the receive
 * buffer (its length in *LEN), or NULL when it cannot be had. */
uint8_t *tls_rx_space(struct tls *t, size_t min, size_t *len);
/* N bytes were received into that room. */
void tls_rx_commit(struct tls *t, size_t n);
/* Ciphertext received and not yet taken by GnuTLS. */
size_t tls_rx_pending(const struct tls *t);
/* Take LEN bytes received before TLS began (they follow the STARTTLS
 * option in the client's stream: its first TLS records).  false: ENOMEM. */
bool tls_rx_put(struct tls *t, const void *p, size_t len);

/* Go on with the handshake: 1 done, 0 it needs more ciphertext (what it
 * wrote waits in the fill buffer), -1 it failed (logged with -v: the
 * GnuTLS reason, an unknown PSK identity, a refused certificate). */
int tls_handshake(struct tls *t);

/* Decrypt into P (up to N bytes): the bytes decrypted (> 0), 0 when no
 * whole record is buffered (more ciphertext needed), -1 when the client
 * ended the session (close_notify), -2 when it failed (logged with -v). */
ssize_t tls_read(struct tls *t, void *p, size_t n);
/* Plaintext still buffered inside GnuTLS (tls_read gives it without new
 * ciphertext). */
bool tls_read_pending(struct tls *t);

/* Encrypt the pieces given between tls_write_begin() and tls_write_end()
 * into records in the fill buffer; small pieces share records.  0, or -1
 * (ENOMEM, a GnuTLS failure): the session cannot go on. */
void tls_write_begin(struct tls *t);
int tls_write(struct tls *t, const void *p, size_t n);
int tls_write_end(struct tls *t);

/* Records waiting in the fill buffer. */
size_t tls_tx_fill_len(const struct tls *t);
/* The send buffer, after swapping in the fill buffer when the send
 * buffer is empty: its bytes in *LEN (0: nothing to send). */
const uint8_t *tls_tx_take(struct tls *t, size_t *len);
/* Bytes of the send buffer (0 once tls_tx_done). */
size_t tls_tx_len(const struct tls *t);
/* The send buffer went out. */
void tls_tx_done(struct tls *t);
/* Free the empty buffers grown past KEEP bytes (a 32 MiB READ's
 * records), the receive buffer too when RX_IDLE (no receive into it in
 * flight). */
void tls_give_back(struct tls *t, size_t keep, bool rx_idle);

#endif
