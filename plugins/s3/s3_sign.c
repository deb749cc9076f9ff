/* AWS Signature Version 4 for one S3 request (OpenSSL's libcrypto), in the
 * steps the specification names: the request's target (URL), the
 * canonical request, the string to sign and its signature, and the headers
 * that carry it. */
#define _POSIX_C_SOURCE 200809L

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "s3_internal.h"

/* ---- encodings and digests ------------------------------------------------- */

char* s3_uri_encode(const char* s, int keep_slash) {
  plugin_buf b = {NULL, 0, 0};
  if (objstore_url_encode(&b, s, keep_slash) != 0 || plugin_buf_append(&b, "", 0) != 0) {
    plugin_buf_free(&b);
    return NULL;
  }
  return b.data;
}

static void hex_encode(const unsigned char* in, size_t n, char* out) {
  static const char hex[] = "0123456789abcdef";
  size_t i;
  for (i = 0; i < n; ++i) {
    out[2 * i] = hex[in[i] >> 4];
    out[2 * i + 1] = hex[in[i] & 15];
  }
  out[2 * n] = '\0';
}

/* SHA-256, looked up once: OpenSSL 3 otherwise looks the algorithm up
 * again for every digest (0.68 against 0.23 us for a 64-byte one here).
 * The version is asked at run time: where the process exports another
 * library's crypto (TensorFlow's BoringSSL) and the plugin is not
 * deep-bound, these calls reach that library, which has no EVP_MD_fetch
 * and whose digests OpenSSL's functions cannot read. */
static const EVP_MD* sha256_algorithm;

static void find_sha256(void) {
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
  if (OpenSSL_version_num() >= 0x30000000L)
    sha256_algorithm = EVP_MD_fetch(NULL, "SHA256", NULL);
#endif
  if (sha256_algorithm == NULL) sha256_algorithm = EVP_sha256();
}

static const EVP_MD* sha256(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, find_sha256);
  return sha256_algorithm;
}

/* SHA-256 of a then b (b may be empty), on ctx. */
static void sha256_of(EVP_MD_CTX* ctx, const void* a, size_t a_len, const void* b, size_t b_len,
                      unsigned char out[32]) {
  EVP_DigestInit_ex(ctx, sha256(), NULL);
  EVP_DigestUpdate(ctx, a, a_len);
  if (b_len > 0) EVP_DigestUpdate(ctx, b, b_len);
  EVP_DigestFinal_ex(ctx, out, NULL);
}

static void sha256_hex(const char* data, size_t n, char out[65]) {
  unsigned char md[32];
  unsigned int len = 0;
  EVP_Digest(data, n, md, &len, sha256(), NULL);
  hex_encode(md, 32, out);
}

void s3_md5_base64(const char* data, size_t len, char out[32]) {
  unsigned char md[16];
  unsigned int n = 0;
  EVP_Digest(data, len, md, &n, EVP_md5(), NULL);
  EVP_EncodeBlock((unsigned char*)out, md, 16);
}

/* HMAC-SHA256 (RFC 2104) of msg under key, on ctx (out may be key): built from the digest
 * looked up once, as OpenSSL 3's one-shot HMAC() fetches its algorithm
 * and makes a context per call (2.5 us here, five times per signature). */
static void hmac(EVP_MD_CTX* ctx, const void* key, size_t key_len, const char* msg,
                 unsigned char out[32]) {
  unsigned char pad[64], inner[32];
  size_t i;
  memset(pad, 0, sizeof pad);
  if (key_len > sizeof pad) sha256_of(ctx, key, key_len, NULL, 0, pad);
  else memcpy(pad, key, key_len);
  for (i = 0; i < sizeof pad; ++i) pad[i] ^= 0x36;
  sha256_of(ctx, pad, sizeof pad, msg, strlen(msg), inner);
  for (i = 0; i < sizeof pad; ++i) pad[i] ^= 0x36 ^ 0x5c;
  sha256_of(ctx, pad, sizeof pad, inner, sizeof inner, out);
  OPENSSL_cleanse(pad, sizeof pad);
}

static int append_str(plugin_buf* b, const char* s) {
  return plugin_buf_append(b, s, strlen(s));
}

/* ---- the target: scheme, host, canonical path and query ---------------------- */

typedef struct target {
  char scheme[16];
  char host[512];
  plugin_buf path;  /* "/" + [bucket "/"] + the key, encoded once */
  plugin_buf query; /* names sorted, names and values encoded */
  int path_style;   /* the bucket leads the path, not the host */
} target;

static void target_free(target* t) {
  plugin_buf_free(&t->path);
  plugin_buf_free(&t->query);
}

static int cmp_params(const void* a, const void* b) {
  return strcmp(((const s3_param*)a)->name, ((const s3_param*)b)->name);
}

static int canonical_query(const s3_request* req, plugin_buf* out) {
  s3_param sorted[16];
  int i, n = req->num_params < 16 ? req->num_params : 16;
  memcpy(sorted, req->params, (size_t)n * sizeof *sorted);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_params);
  for (i = 0; i < n; ++i) {
    const char* v = sorted[i].value != NULL ? sorted[i].value : "";
    char* name = s3_uri_encode(sorted[i].name, 0);
    char* value = s3_uri_encode(v, 0);
    int bad = name == NULL || value == NULL ||
              (i > 0 && append_str(out, "&") != 0) ||
              append_str(out, name) != 0 || append_str(out, "=") != 0 ||
              append_str(out, value) != 0;
    free(name);
    free(value);
    if (bad) return -1;
  }
  return out->data == NULL ? plugin_buf_append(out, "", 0) : 0;
}

/* AWS's own endpoint unless one is configured; the bucket in the host
 * (virtual-hosted style) or in the path (path style). */
/* Whether a bucket can lead the host name, as boto3 decides: a DNS label
 * (lowercase letters, digits, '-'; no dots, which a wildcard certificate
 * does not cover), on a host that is a name, not an IP address. */
static int virtual_host_possible(const char* bucket, const char* host, int host_len) {
  int i, numeric = 1;
  for (i = 0; bucket[i] != '\0'; ++i)
    if (!((bucket[i] >= 'a' && bucket[i] <= 'z') || (bucket[i] >= '0' && bucket[i] <= '9') ||
          bucket[i] == '-'))
      return 0;
  if (host_len > 0 && host[0] == '[') return 0; /* IPv6 */
  for (i = 0; i < host_len && host[i] != ':'; ++i)
    if (!((host[i] >= '0' && host[i] <= '9') || host[i] == '.')) numeric = 0;
  return !numeric && !(i == 9 && strncmp(host, "localhost", 9) == 0);
}

static void endpoint_host(const s3_config* cfg, const s3_request* req,
                          target* t) {
  const char* endpoint = cfg->endpoint;
  const char* sep = strstr(endpoint, "://");
  const char* hostpart = *endpoint == '\0' ? "s3.amazonaws.com" : sep ? sep + 3 : endpoint;
  int virtual_host = req->bucket != NULL && !cfg->path_style &&
                     virtual_host_possible(req->bucket, hostpart, (int)strcspn(hostpart, "/"));
  t->path_style = req->bucket != NULL && !virtual_host;
  if (*endpoint == '\0') {
    snprintf(t->scheme, sizeof t->scheme, "https");
    if (virtual_host)
      snprintf(t->host, sizeof t->host, "%s.s3.%s.amazonaws.com", req->bucket, cfg->region);
    else
      snprintf(t->host, sizeof t->host, "s3.%s.amazonaws.com", cfg->region);
  } else {
    int len = (int)strcspn(hostpart, "/");
    snprintf(t->scheme, sizeof t->scheme, "%.*s", sep ? (int)(sep - endpoint) : 4,
             sep ? endpoint : "http");
    if (virtual_host)
      snprintf(t->host, sizeof t->host, "%s.%.*s", req->bucket, len, hostpart);
    else
      snprintf(t->host, sizeof t->host, "%.*s", len, hostpart);
  }
}

static int build_target(const s3_config* cfg, const s3_request* req, target* t) {
  const char* key = req->key != NULL ? req->key : "";
  char* encoded = s3_uri_encode(key, 1); /* S3 encodes once, keeping "/" */
  int bad;
  if (encoded == NULL) return -1;
  endpoint_host(cfg, req, t);
  bad = append_str(&t->path, "/") != 0 ||
        (t->path_style &&
         (append_str(&t->path, req->bucket) != 0 ||
          (*key != '\0' && append_str(&t->path, "/") != 0))) ||
        append_str(&t->path, encoded) != 0 || canonical_query(req, &t->query) != 0;
  free(encoded);
  return bad ? -1 : 0;
}

static char* build_url(const target* t) {
  plugin_buf url = {0};
  if (append_str(&url, t->scheme) != 0 || append_str(&url, "://") != 0 ||
      append_str(&url, t->host) != 0 ||
      plugin_buf_append(&url, t->path.data, t->path.len) != 0 ||
      (t->query.len > 0 && (append_str(&url, "?") != 0 ||
                            plugin_buf_append(&url, t->query.data, t->query.len) != 0))) {
    plugin_buf_free(&url);
    return NULL;
  }
  return url.data;
}

/* ---- the canonical request ------------------------------------------------- */

/* What the signature covers besides the target. */
typedef struct signing {
  char amz_date[17];     /* 20260102T030405Z */
  char date[9];          /* 20260102 */
  char payload_hash[65]; /* hex SHA-256 of the body, or UNSIGNED-PAYLOAD */
  char* copy_source;     /* the encoded x-amz-copy-source, or NULL */
  plugin_buf signed_names; /* "host;x-amz-content-sha256;..." */
} signing;

/* Whether bodies are signed with their SHA-256 (sign_payload -1: only
 * those sent in the clear; no endpoint is AWS, over https). */
static int signs_payload(const s3_config* cfg) {
  if (cfg->sign_payload >= 0) return cfg->sign_payload != 0;
  return strncmp(cfg->endpoint, "http://", 7) == 0;
}

static int signing_init(const s3_config* cfg, const s3_credentials* creds,
                        const s3_request* req, time_t now, signing* s) {
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(s->amz_date, sizeof s->amz_date, "%Y%m%dT%H%M%SZ", &tm);
  memcpy(s->date, s->amz_date, 8);
  s->date[8] = '\0';
  if (signs_payload(cfg) || req->body_len == 0)
    sha256_hex(req->body != NULL ? req->body : "", req->body_len, s->payload_hash);
  else
    snprintf(s->payload_hash, sizeof s->payload_hash, "UNSIGNED-PAYLOAD");
  s->copy_source = NULL;
  if (req->copy_source != NULL) {
    s->copy_source = s3_uri_encode(req->copy_source, 1);
    if (s->copy_source == NULL) return -1;
  }
  /* In the sorted order the canonical headers take. */
  if (append_str(&s->signed_names, "host;x-amz-content-sha256") != 0 ||
      (s->copy_source != NULL && append_str(&s->signed_names, ";x-amz-copy-source") != 0) ||
      (s->copy_source != NULL && req->copy_range != NULL &&
       append_str(&s->signed_names, ";x-amz-copy-source-range") != 0) ||
      append_str(&s->signed_names, ";x-amz-date") != 0)
    return -1;
  if (req->attributes != NULL) {
    int i;
    for (i = 0; i < req->attributes->names.count; ++i)
      if (append_str(&s->signed_names, ";x-amz-meta-") != 0 ||
          append_str(&s->signed_names, req->attributes->names.items[i]) != 0)
        return -1;
  }
  if (*creds->session_token != '\0' && append_str(&s->signed_names, ";x-amz-security-token") != 0)
    return -1;
  return 0;
}

/* One "name:value\n" line of the canonical headers. */
static int header_line(plugin_buf* b, const char* name, const char* prefix,
                       const char* value) {
  return append_str(b, name) != 0 || append_str(b, ":") != 0 ||
         append_str(b, prefix) != 0 || append_str(b, value) != 0 ||
         append_str(b, "\n") != 0;
}

/* The user metadata's canonical header lines (names sorted already). */
static int meta_lines(plugin_buf* b, const s3_attributes* a) {
  int i;
  for (i = 0; a != NULL && i < a->names.count; ++i)
    if (append_str(b, "x-amz-meta-") != 0 ||
        header_line(b, a->names.items[i], "", a->values.items[i]) != 0)
      return -1;
  return 0;
}

/* Method, path, query, the signed headers in sorted order, their names,
 * and the payload hash, one per line. */
static int canonical_request(const s3_credentials* creds, const s3_request* req,
                             const target* t, const signing* s, plugin_buf* out) {
  const char* token = creds->session_token;
  return append_str(out, req->method) != 0 || append_str(out, "\n") != 0 ||
         plugin_buf_append(out, t->path.data, t->path.len) != 0 ||
         append_str(out, "\n") != 0 ||
         plugin_buf_append(out, t->query.data, t->query.len) != 0 ||
         append_str(out, "\n") != 0 || header_line(out, "host", "", t->host) != 0 ||
         header_line(out, "x-amz-content-sha256", "", s->payload_hash) != 0 ||
         (s->copy_source != NULL &&
          (header_line(out, "x-amz-copy-source", "/", s->copy_source) != 0 ||
           (req->copy_range != NULL &&
            header_line(out, "x-amz-copy-source-range", "", req->copy_range) != 0))) ||
         header_line(out, "x-amz-date", "", s->amz_date) != 0 ||
         meta_lines(out, req->attributes) != 0 ||
         (*token != '\0' && header_line(out, "x-amz-security-token", "", token) != 0) ||
         append_str(out, "\n") != 0 || append_str(out, s->signed_names.data) != 0 ||
         append_str(out, "\n") != 0 || append_str(out, s->payload_hash) != 0;
}

/* ---- the signature ------------------------------------------------------------ */

/* HMAC of the string to sign under the key derived from the secret, the
 * date, the region and the service. 0, or -1 when out of memory. */
static int signature(const s3_config* cfg, const s3_credentials* creds, const signing* s,
                     const char* request_hash, char out[65]) {
  plugin_buf to_sign = {0}, secret = {0};
  unsigned char key[32], sig[32];
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  int ok = ctx != NULL && append_str(&to_sign, "AWS4-HMAC-SHA256\n") == 0 &&
           append_str(&to_sign, s->amz_date) == 0 && append_str(&to_sign, "\n") == 0 &&
           append_str(&to_sign, s->date) == 0 && append_str(&to_sign, "/") == 0 &&
           append_str(&to_sign, cfg->region) == 0 &&
           append_str(&to_sign, "/s3/aws4_request\n") == 0 &&
           append_str(&to_sign, request_hash) == 0 && append_str(&secret, "AWS4") == 0 &&
           append_str(&secret, creds->secret_key) == 0;
  if (ok) {
    hmac(ctx, secret.data, secret.len, s->date, key);
    hmac(ctx, key, sizeof key, cfg->region, key);
    hmac(ctx, key, sizeof key, "s3", key);
    hmac(ctx, key, sizeof key, "aws4_request", key);
    hmac(ctx, key, sizeof key, to_sign.data, sig);
    hex_encode(sig, 32, out);
    OPENSSL_cleanse(key, sizeof key);
  }
  if (secret.data != NULL) OPENSSL_cleanse(secret.data, secret.len);
  plugin_buf_free(&secret);
  plugin_buf_free(&to_sign);
  EVP_MD_CTX_free(ctx);
  return ok ? 0 : -1;
}

/* ---- the headers ---------------------------------------------------------------- */

/* Appends "Name: prefix+value" to list; "Name:" alone (an empty value)
 * removes a header curl would add. No length limit. */
static int add_header(struct curl_slist** list, const char* name,
                      const char* prefix, const char* value) {
  plugin_buf line = {0};
  struct curl_slist* next = NULL;
  int empty = *prefix == '\0' && *value == '\0';
  if (append_str(&line, name) == 0 && append_str(&line, empty ? ":" : ": ") == 0 &&
      append_str(&line, prefix) == 0 && append_str(&line, value) == 0)
    next = curl_slist_append(*list, line.data);
  plugin_buf_free(&line);
  if (next == NULL) return -1;
  *list = next;
  return 0;
}

static int authorization(const s3_config* cfg, const s3_credentials* creds, const signing* s,
                         const char* sig_hex, plugin_buf* out) {
  return append_str(out, "AWS4-HMAC-SHA256 Credential=") != 0 ||
         append_str(out, creds->access_key) != 0 || append_str(out, "/") != 0 ||
         append_str(out, s->date) != 0 || append_str(out, "/") != 0 ||
         append_str(out, cfg->region) != 0 ||
         append_str(out, "/s3/aws4_request, SignedHeaders=") != 0 ||
         append_str(out, s->signed_names.data) != 0 || append_str(out, ", Signature=") != 0 ||
         append_str(out, sig_hex) != 0;
}

/* The headers; creds NULL: unsigned (no Authorization, no token). */
static int meta_headers(struct curl_slist** out, const s3_attributes* a) {
  int i;
  char name[160];
  for (i = 0; a != NULL && i < a->names.count; ++i) {
    snprintf(name, sizeof name, "x-amz-meta-%s", a->names.items[i]);
    if (add_header(out, name, "", a->values.items[i]) != 0) return -1;
  }
  return 0;
}

static int build_headers(const s3_config* cfg, const s3_credentials* creds,
                         const s3_request* req, const signing* s, const char* sig_hex,
                         struct curl_slist** out) {
  plugin_buf auth = {0};
  int bad = (creds != NULL && (authorization(cfg, creds, s, sig_hex, &auth) != 0 ||
                               add_header(out, "Authorization", "", auth.data) != 0)) ||
            add_header(out, "x-amz-content-sha256", "", s->payload_hash) != 0 ||
            add_header(out, "x-amz-date", "", s->amz_date) != 0 ||
            add_header(out, "Expect", "", "") != 0 ||
            (creds != NULL && *creds->session_token != '\0' &&
             add_header(out, "x-amz-security-token", "", creds->session_token) != 0) ||
            (s->copy_source != NULL &&
             (add_header(out, "x-amz-copy-source", "/", s->copy_source) != 0 ||
              (req->copy_range != NULL &&
               add_header(out, "x-amz-copy-source-range", "", req->copy_range) != 0))) ||
            (req->range != NULL && add_header(out, "Range", "", req->range) != 0) ||
            (req->if_match != NULL && add_header(out, "If-Match", "", req->if_match) != 0) ||
            (req->if_none_match != NULL &&
             add_header(out, "If-None-Match", "", req->if_none_match) != 0) ||
            (req->content_md5 != NULL &&
             add_header(out, "Content-MD5", "", req->content_md5) != 0) ||
            meta_headers(out, req->attributes) != 0 ||
            (req->content_type != NULL
                 ? add_header(out, "Content-Type", "", req->content_type) != 0
                 : req->body != NULL &&
                       add_header(out, "Content-Type", "", "application/octet-stream") != 0);
  plugin_buf_free(&auth);
  return bad;
}

/* ---- all of it ------------------------------------------------------------------- */

int s3_sign(const s3_config* cfg, const s3_credentials* creds, const s3_request* req,
            time_t now, s3_signed* out) {
  static const s3_credentials unsigned_request = {0, "", "", "", 0, "anonymous"};
  target t;
  signing s;
  plugin_buf canon = {0};
  char request_hash[65], sig_hex[65] = "";
  int ok = -1;
  memset(&t, 0, sizeof t);
  memset(&s, 0, sizeof s);
  out->url = NULL;
  out->headers = NULL;
  if (signing_init(cfg, creds != NULL ? creds : &unsigned_request, req, now, &s) != 0)
    goto done;
  if (build_target(cfg, req, &t) != 0) goto done;
  if (creds != NULL) {
    if (canonical_request(creds, req, &t, &s, &canon) != 0) goto done;
    sha256_hex(canon.data, canon.len, request_hash);
    if (signature(cfg, creds, &s, request_hash, sig_hex) != 0) goto done;
  }
  if (build_headers(cfg, creds, req, &s, sig_hex, &out->headers) != 0) goto done;
  out->url = build_url(&t);
  if (out->url != NULL) ok = 0;
done:
  if (ok != 0) s3_signed_free(out);
  free(s.copy_source);
  plugin_buf_free(&s.signed_names);
  target_free(&t);
  plugin_buf_free(&canon);
  return ok;
}

void s3_signed_free(s3_signed* s) {
  free(s->url);
  curl_slist_free_all(s->headers);
  s->url = NULL;
  s->headers = NULL;
}
