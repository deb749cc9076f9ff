/* The s3 plugin's settings: read from the usual environment variables when
 * the filesystem starts (and, for what they leave unset, from the shared
 * config file's profile, as boto3 does), changed later through the ABI's
 * configuration ops.
 * Every change makes a new snapshot; requests keep the one they started
 * with. The secret and the session token are never given back. */
#define _POSIX_C_SOURCE 200809L

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "s3_internal.h"

#define MiB ((int64_t)1 << 20)
#define GiB ((int64_t)1 << 30)

static const plugin_option s3_options[] = {
    OBJSTORE_OPTIONS(s3_config, transport),
    {"endpoint", "endpoint URL, e.g. http://127.0.0.1:8000 (AWS_ENDPOINT_URL)",
     PLUGIN_OPTION_TEXT, offsetof(s3_config, endpoint), 0, 0, 0},
    {"region", "signing region (AWS_REGION)", PLUGIN_OPTION_TEXT,
     offsetof(s3_config, region), 0, 0, 0},
    {"access_key_id", "access key id (AWS_ACCESS_KEY_ID)", PLUGIN_OPTION_TEXT,
     offsetof(s3_config, access_key), 0, 0, 0},
    {"secret_access_key", "secret key (AWS_SECRET_ACCESS_KEY); write-only",
     PLUGIN_OPTION_TEXT, offsetof(s3_config, secret_key), 0, 0, 1},
    {"session_token", "session token (AWS_SESSION_TOKEN); write-only", PLUGIN_OPTION_TEXT,
     offsetof(s3_config, session_token), 0, 0, 1},
    {"profile",
     "the shared config and credentials files' profile to take credentials "
     "from (AWS_PROFILE); \"\" is \"default\"",
     PLUGIN_OPTION_TEXT, offsetof(s3_config, profile), 0, 0, 0},
    {"anonymous", "1: send requests unsigned, for public buckets (AWS_SKIP_SIGNATURE)",
     PLUGIN_OPTION_INT, offsetof(s3_config, anonymous), 0, 1, 0},
    {"content_type",
     "Content-Type of the objects written: \"auto\" guesses from the name's "
     "extension (application/octet-stream when unknown)",
     PLUGIN_OPTION_TEXT, offsetof(s3_config, content_type), 0, 0, 0},
    {"path_style",
     "1: http://endpoint/bucket/key, 0: http://bucket.endpoint/key "
     "(AWS_S3_ADDRESSING_STYLE=path|virtual)",
     PLUGIN_OPTION_INT, offsetof(s3_config, path_style), 0, 1, 0},
    {"part_size",
     "multipart part size: larger writes upload, larger copies copy, in "
     "parts of this size (AWS_S3_PART_SIZE)",
     PLUGIN_OPTION_INT, offsetof(s3_config, part_size), 5 * MiB, 5 * GiB, 0},
    {"concurrency", "requests in flight for one operation",
     PLUGIN_OPTION_INT, offsetof(s3_config, concurrency), 1, 256, 0},
    {"read_ahead", "bytes fetched with the open of a file for reading",
     PLUGIN_OPTION_INT, offsetof(s3_config, read_ahead), 0, 64 * MiB, 0},
    {"sign_payload",
     "1: sign request bodies' SHA-256, 0: UNSIGNED-PAYLOAD, -1: sign over "
     "http:// only (TLS protects the body), as boto3 does",
     PLUGIN_OPTION_INT, offsetof(s3_config, sign_payload), -1, 1, 0},
    {"credential_timeout_ms",
     "a credential_process still running after this long is killed and its "
     "credentials fail",
     PLUGIN_OPTION_INT, offsetof(s3_config, credential_timeout_ms), 1, 3600000, 0},
};
const plugin_schema s3_schema = {
    "s3", s3_options, (int)(sizeof s3_options / sizeof s3_options[0]),
    sizeof(s3_config)};

static const char* env_first(const char* a, const char* b) {
  const char* v = getenv(a);
  if ((v == NULL || *v == '\0') && b != NULL) v = getenv(b);
  return v != NULL ? v : "";
}

/* An integer from the environment; a value that is not one is kept in
 * d->error (the first such), and the fallback used meanwhile. */
static int64_t env_int(s3_defaults* d, const char* name, int64_t fallback) {
  const char* v = getenv(name);
  char* end;
  long long n;
  if (v == NULL || *v == '\0') return fallback;
  n = strtoll(v, &end, 10);
  if (*end == '\0') return (int64_t)n;
  if (d->error[0] == '\0')
    snprintf(d->error, sizeof d->error, "s3: %s='%.100s' is not an integer", name, v);
  return fallback;
}

/* One of the words a setting takes; anything else is kept in d->error. */
static void env_word(s3_defaults* d, const char* name, const char* v, const char* a,
                     const char* b) {
  if (*v == '\0' || strcmp(v, a) == 0 || strcmp(v, b) == 0 || d->error[0] != '\0') return;
  snprintf(d->error, sizeof d->error, "s3: %s='%.100s' is neither '%s' nor '%s'", name, v, a, b);
}

/* Whether v (named name; NULL or empty: unset) says true; a value that is
 * neither true nor false is kept in d->error. */
static int word_true(s3_defaults* d, const char* name, const char* v) {
  if (v == NULL) return 0;
  if (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0) return 1;
  if (*v != '\0' && strcmp(v, "0") != 0 && strcasecmp(v, "false") != 0 && d->error[0] == '\0')
    snprintf(d->error, sizeof d->error, "s3: %s='%.100s' is neither true nor false", name, v);
  return 0;
}

static int env_true(s3_defaults* d, const char* name) {
  return word_true(d, name, getenv(name));
}

/* The environment's value (none asked for with env_a NULL), else the
 * profile's (kept in defaults). */
static const char* env_or_profile(s3_defaults* d, const char* env_a, const char* env_b,
                                  const char* profile, const char* key) {
  const char* v = env_a != NULL ? env_first(env_a, env_b) : "";
  char* from_file;
  if (*v != '\0' || d->num_owned == (int)(sizeof d->owned / sizeof d->owned[0])) return v;
  if (!d->config_file_read) {
    d->config_file = s3_config_file_text();
    d->config_file_read = 1;
  }
  from_file = s3_config_file_get(d->config_file, profile, key);
  if (from_file == NULL) return "";
  d->owned[d->num_owned++] = from_file;
  return from_file;
}

void s3_defaults_load(s3_defaults* d) {
  s3_config* c = &d->config;
  const char* profile = env_first("AWS_PROFILE", "AWS_DEFAULT_PROFILE");
  const char *style, *signing;
  memset(d, 0, sizeof *d);
  c->profile = (char*)profile;
  if (*profile == '\0') profile = "default";
  c->endpoint = (char*)env_or_profile(d, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", profile,
                                      "endpoint_url");
  c->region = (char*)env_or_profile(d, "AWS_REGION", "AWS_DEFAULT_REGION", profile, "region");
  if (*c->region == '\0') c->region = "us-east-1";
  c->access_key = (char*)env_first("AWS_ACCESS_KEY_ID", NULL);
  c->secret_key = (char*)env_first("AWS_SECRET_ACCESS_KEY", NULL);
  c->session_token = (char*)env_first("AWS_SESSION_TOKEN", NULL);
  c->transport.ca_bundle = (char*)env_or_profile(d, "AWS_CA_BUNDLE", NULL, profile, "ca_bundle");
  c->anonymous = env_true(d, "AWS_SKIP_SIGNATURE");
  c->transport.verify_tls = 1;
  c->content_type = "auto";
  /* A custom endpoint (a gateway on an address) is usually path-style. */
  c->path_style = *c->endpoint != '\0';
  style = env_or_profile(d, "AWS_S3_ADDRESSING_STYLE", NULL, profile, "s3.addressing_style");
  env_word(d, "AWS_S3_ADDRESSING_STYLE (or the profile's s3.addressing_style)", style, "path",
           "virtual");
  if (strcmp(style, "path") == 0) c->path_style = 1;
  if (strcmp(style, "virtual") == 0) c->path_style = 0;
  c->transport.connect_timeout_ms = env_int(d, "AWS_CONNECT_TIMEOUT_MS", 5000);
  c->transport.read_timeout_ms = env_int(d, "AWS_READ_TIMEOUT_MS", 30000);
  /* Ten tries with backoff ceilings 100 ms, 200 ms, ... up to 5 s wait
   * about 10 s in all (full jitter), enough to ride out a gateway restart;
   * the budget stops them at 20 s. */
  c->transport.max_attempts = env_int(d, "AWS_MAX_ATTEMPTS", 10);
  c->transport.retry_budget_ms = env_int(d, "AWS_RETRY_BUDGET_MS", 20000);
  c->transport.retry_base_ms = 100;
  c->part_size = env_int(d, "AWS_S3_PART_SIZE", 8 * MiB);
  c->concurrency = 16;
  c->transport.max_connections = env_int(d, "AWS_MAX_CONNECTIONS", 128);
  c->transport.idle_timeout_ms = 30000;
  c->transport.block_size = 1 << 20; /* the caches stay off: stat_cache_ms and block_cache_bytes 0 */
  c->credential_timeout_ms = 60000;
  c->read_ahead = 64 * 1024;
  /* boto3's rule: a body sent over TLS goes as UNSIGNED-PAYLOAD (TLS guards
   * it; neither end then hashes it), one sent in the clear is signed; the
   * profile's s3.payload_signing_enabled = true signs it over TLS too. */
  signing = env_or_profile(d, NULL, NULL, profile, "s3.payload_signing_enabled");
  c->sign_payload = word_true(d, "the profile's s3.payload_signing_enabled", signing) ? 1 : -1;
  /* Out-of-range numbers from the environment fall back to the bounds
   * (plugin_config_init clamps them). */
}

void s3_defaults_free(s3_defaults* d) {
  int i;
  for (i = 0; i < d->num_owned; ++i) free(d->owned[i]);
  d->num_owned = 0;
  free(d->config_file);
  d->config_file = NULL;
}
