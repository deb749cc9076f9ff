/* The s3 plugin's settings: read from the usual environment variables when
 * the filesystem starts, changed later through the ABI's configuration ops.
 * Every change makes a new snapshot; requests keep the one they started
 * with. The secret and the session token are never given back. */
#define _POSIX_C_SOURCE 200809L

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3_internal.h"

typedef enum { TEXT, INT } option_type;

typedef struct option_spec {
  const char* name;
  const char* description;
  option_type type;
  size_t offset; /* into s3_config */
  int64_t min_value;
  int64_t max_value;
  int secret;
} option_spec;

#define MiB ((int64_t)1 << 20)
#define GiB ((int64_t)1 << 30)

static const option_spec specs[] = {
    {"endpoint", "endpoint URL, e.g. http://127.0.0.1:8000 (AWS_ENDPOINT_URL)",
     TEXT, offsetof(s3_config, endpoint), 0, 0, 0},
    {"region", "signing region (AWS_REGION)", TEXT,
     offsetof(s3_config, region), 0, 0, 0},
    {"access_key_id", "access key id (AWS_ACCESS_KEY_ID)", TEXT,
     offsetof(s3_config, access_key), 0, 0, 0},
    {"secret_access_key", "secret key (AWS_SECRET_ACCESS_KEY); write-only",
     TEXT, offsetof(s3_config, secret_key), 0, 0, 1},
    {"session_token", "session token (AWS_SESSION_TOKEN); write-only", TEXT,
     offsetof(s3_config, session_token), 0, 0, 1},
    {"path_style",
     "1: http://endpoint/bucket/key, 0: http://bucket.endpoint/key "
     "(AWS_S3_ADDRESSING_STYLE=path|virtual)",
     INT, offsetof(s3_config, path_style), 0, 1, 0},
    {"connect_timeout_ms", "connection set-up limit (AWS_CONNECT_TIMEOUT_MS)",
     INT, offsetof(s3_config, connect_timeout_ms), 1, 600000, 0},
    {"read_timeout_ms",
     "a transfer with no byte moving for this long fails and is retried "
     "(AWS_READ_TIMEOUT_MS)",
     INT, offsetof(s3_config, read_timeout_ms), 1000, 3600000, 0},
    {"max_attempts", "tries per request, the first included (AWS_MAX_ATTEMPTS)",
     INT, offsetof(s3_config, max_attempts), 1, 100, 0},
    {"retry_budget_ms",
     "no retry starts this long after a request's first try "
     "(AWS_RETRY_BUDGET_MS)",
     INT, offsetof(s3_config, retry_budget_ms), 0, 3600000, 0},
    {"retry_base_ms", "first retry's backoff ceiling; doubles, full jitter",
     INT, offsetof(s3_config, retry_base_ms), 1, 60000, 0},
    {"part_size",
     "multipart part size: larger writes upload, larger copies copy, in "
     "parts of this size (AWS_S3_PART_SIZE)",
     INT, offsetof(s3_config, part_size), 5 * MiB, 5 * GiB, 0},
    {"concurrency", "requests in flight for one operation",
     INT, offsetof(s3_config, concurrency), 1, 256, 0},
    {"read_ahead", "bytes fetched with the open of a file for reading",
     INT, offsetof(s3_config, read_ahead), 0, 64 * MiB, 0},
    {"sign_payload", "1: sign request bodies' SHA-256, 0: UNSIGNED-PAYLOAD",
     INT, offsetof(s3_config, sign_payload), 0, 1, 0},
};
#define NUM_SPECS ((int)(sizeof specs / sizeof specs[0]))

static char** text_field(s3_config* c, const option_spec* s) {
  return (char**)((char*)c + s->offset);
}
static int64_t* int_field(s3_config* c, const option_spec* s) {
  return (int64_t*)((char*)c + s->offset);
}

void s3_config_release(s3_config* config) {
  int i;
  if (config == NULL ||
      __atomic_sub_fetch(&config->refs, 1, __ATOMIC_ACQ_REL) > 0)
    return;
  for (i = 0; i < NUM_SPECS; ++i)
    if (specs[i].type == TEXT) free(*text_field(config, &specs[i]));
  free(config);
}

s3_config* s3_config_acquire(s3_fs* fs) {
  s3_config* c;
  pthread_mutex_lock(&fs->lock);
  c = fs->config;
  __atomic_add_fetch(&c->refs, 1, __ATOMIC_ACQ_REL);
  pthread_mutex_unlock(&fs->lock);
  return c;
}

static s3_config* config_copy(const s3_config* src) {
  int i;
  s3_config* c = malloc(sizeof *c);
  if (c == NULL) return NULL;
  *c = *src;
  c->refs = 1;
  for (i = 0; i < NUM_SPECS; ++i) {
    if (specs[i].type != TEXT) continue;
    char** f = text_field(c, &specs[i]);
    *f = strdup(*f != NULL ? *f : "");
    if (*f == NULL) {
      while (--i >= 0)
        if (specs[i].type == TEXT) free(*text_field(c, &specs[i]));
      free(c);
      return NULL;
    }
  }
  return c;
}

static const char* env_first(const char* a, const char* b) {
  const char* v = getenv(a);
  if ((v == NULL || *v == '\0') && b != NULL) v = getenv(b);
  return v != NULL ? v : "";
}

static int64_t env_int(const char* name, int64_t fallback) {
  const char* v = getenv(name);
  char* end;
  long long n;
  if (v == NULL || *v == '\0') return fallback;
  n = strtoll(v, &end, 10);
  return *end == '\0' ? (int64_t)n : fallback;
}

s3_config* s3_config_from_environment(TF_Status* status) {
  s3_config defaults;
  s3_config* c;
  const char* style = getenv("AWS_S3_ADDRESSING_STYLE");
  memset(&defaults, 0, sizeof defaults);
  defaults.endpoint = (char*)env_first("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL");
  defaults.region = (char*)env_first("AWS_REGION", "AWS_DEFAULT_REGION");
  if (*defaults.region == '\0') defaults.region = "us-east-1";
  defaults.access_key = (char*)env_first("AWS_ACCESS_KEY_ID", NULL);
  defaults.secret_key = (char*)env_first("AWS_SECRET_ACCESS_KEY", NULL);
  defaults.session_token = (char*)env_first("AWS_SESSION_TOKEN", NULL);
  /* A custom endpoint (a gateway on an address) is usually path-style. */
  defaults.path_style = *defaults.endpoint != '\0';
  if (style != NULL && strcmp(style, "path") == 0) defaults.path_style = 1;
  if (style != NULL && strcmp(style, "virtual") == 0) defaults.path_style = 0;
  defaults.connect_timeout_ms = env_int("AWS_CONNECT_TIMEOUT_MS", 5000);
  defaults.read_timeout_ms = env_int("AWS_READ_TIMEOUT_MS", 30000);
  defaults.max_attempts = env_int("AWS_MAX_ATTEMPTS", 5);
  defaults.retry_budget_ms = env_int("AWS_RETRY_BUDGET_MS", 20000);
  defaults.retry_base_ms = 50;
  defaults.part_size = env_int("AWS_S3_PART_SIZE", 8 * MiB);
  defaults.concurrency = 16;
  defaults.read_ahead = 64 * 1024;
  defaults.sign_payload = 1;
  c = config_copy(&defaults);
  if (c == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  /* Out-of-range numbers from the environment fall back to the bounds. */
  for (int i = 0; i < NUM_SPECS; ++i) {
    if (specs[i].type != INT) continue;
    int64_t* f = int_field(c, &specs[i]);
    if (*f < specs[i].min_value) *f = specs[i].min_value;
    if (*f > specs[i].max_value) *f = specs[i].max_value;
  }
  TF_SetStatus(status, TF_OK, "");
  return c;
}

/* ---- the ABI's configuration ops ----------------------------------------- */

static const option_spec* find_spec(const char* name) {
  int i;
  for (i = 0; i < NUM_SPECS; ++i)
    if (strcmp(specs[i].name, name) == 0) return &specs[i];
  return NULL;
}

static int fill(const option_spec* s, s3_config* c, TF_Filesystem_Option* o) {
  TF_Filesystem_Option_Value_Union* v;
  o->name = plugin_strdup(s->name);
  o->description = plugin_strdup(s->description);
  o->per_file = 0;
  o->value = plugin_memory_allocate(sizeof *o->value);
  v = plugin_memory_allocate(sizeof *v);
  if (o->name == NULL || o->description == NULL || o->value == NULL ||
      v == NULL) {
    plugin_memory_free(v);
    return -1;
  }
  o->value->num_values = 1;
  o->value->values = v;
  if (s->type == INT) {
    o->value->type_tag = TF_Filesystem_Option_Type_Int;
    v->int_val = *int_field(c, s);
    return 0;
  }
  {
    const char* text = *text_field(c, s);
    /* Secrets read back as whether they are set, never as their value. */
    if (s->secret) text = *text != '\0' ? "(set)" : "";
    o->value->type_tag = TF_Filesystem_Option_Type_Buffer;
    v->buffer_val.buf_length = (int)strlen(text);
    v->buffer_val.buf = plugin_memory_allocate(strlen(text) + 1);
    if (v->buffer_val.buf == NULL) return -1;
    memcpy(v->buffer_val.buf, text, strlen(text) + 1);
  }
  return 0;
}

/* Applies one option to c (a private copy). */
static int apply(s3_config* c, const TF_Filesystem_Option* in,
                 TF_Status* status) {
  char msg[256];
  const option_spec* s = in != NULL && in->name != NULL ? find_spec(in->name)
                                                        : NULL;
  const TF_Filesystem_Option_Value* v = in != NULL ? in->value : NULL;
  if (s == NULL) {
    snprintf(msg, sizeof msg, "s3: no configuration option named '%.64s'",
             in != NULL && in->name != NULL ? in->name : "");
    TF_SetStatus(status, TF_NOT_FOUND, msg);
    return -1;
  }
  if (v == NULL || v->num_values != 1 || v->values == NULL ||
      v->type_tag != (s->type == INT ? TF_Filesystem_Option_Type_Int
                                     : TF_Filesystem_Option_Type_Buffer)) {
    snprintf(msg, sizeof msg, "s3: option '%s' takes exactly one %s", s->name,
             s->type == INT ? "integer" : "string");
    TF_SetStatus(status, TF_INVALID_ARGUMENT, msg);
    return -1;
  }
  if (s->type == INT) {
    int64_t n = v->values[0].int_val;
    if (n < s->min_value || n > s->max_value) {
      snprintf(msg, sizeof msg,
               "s3: option '%s' must be in [%lld, %lld], got %lld", s->name,
               (long long)s->min_value, (long long)s->max_value, (long long)n);
      TF_SetStatus(status, TF_INVALID_ARGUMENT, msg);
      return -1;
    }
    *int_field(c, s) = n;
  } else {
    int n = v->values[0].buffer_val.buf_length;
    char* text = malloc((size_t)(n > 0 ? n : 0) + 1);
    if (text == NULL || n < 0) {
      free(text);
      TF_SetStatus(status, TF_INVALID_ARGUMENT, "s3: bad string option");
      return -1;
    }
    if (n > 0) memcpy(text, v->values[0].buffer_val.buf, (size_t)n);
    text[n] = '\0';
    free(*text_field(c, s));
    *text_field(c, s) = text;
  }
  return 0;
}

void s3_set_configuration(const TF_Filesystem* filesystem,
                          const TF_Filesystem_Option* options, int num_options,
                          TF_Status* status) {
  s3_fs* fs = s3_fs_of(filesystem);
  s3_config* old;
  s3_config* next;
  int i;
  pthread_mutex_lock(&fs->lock);
  next = config_copy(fs->config);
  if (next == NULL) {
    pthread_mutex_unlock(&fs->lock);
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  for (i = 0; i < num_options; ++i) {
    if (apply(next, &options[i], status) != 0) {
      pthread_mutex_unlock(&fs->lock);
      s3_config_release(next);
      return; /* all or nothing */
    }
  }
  old = fs->config;
  fs->config = next;
  pthread_mutex_unlock(&fs->lock);
  s3_config_release(old);
  TF_SetStatus(status, TF_OK, "");
}

void s3_set_configuration_option(const TF_Filesystem* filesystem,
                                 const TF_Filesystem_Option* option,
                                 TF_Status* status) {
  s3_set_configuration(filesystem, option, 1, status);
}

void s3_get_configuration(const TF_Filesystem* filesystem,
                          TF_Filesystem_Option** options, int* num_options,
                          TF_Status* status) {
  s3_config* c = s3_config_acquire(s3_fs_of(filesystem));
  int i;
  *options = plugin_memory_allocate(NUM_SPECS * sizeof **options);
  *num_options = NUM_SPECS;
  if (*options != NULL) memset(*options, 0, NUM_SPECS * sizeof **options);
  for (i = 0; i < NUM_SPECS; ++i) {
    if (*options == NULL || fill(&specs[i], c, &(*options)[i]) != 0) {
      s3_config_release(c);
      TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
      return;
    }
  }
  s3_config_release(c);
  TF_SetStatus(status, TF_OK, "");
}

void s3_get_configuration_option(const TF_Filesystem* filesystem,
                                 const char* key,
                                 TF_Filesystem_Option** option,
                                 TF_Status* status) {
  char msg[128];
  const option_spec* s = find_spec(key);
  s3_config* c;
  *option = NULL;
  if (s == NULL) {
    snprintf(msg, sizeof msg, "s3: no configuration option named '%.64s'", key);
    TF_SetStatus(status, TF_NOT_FOUND, msg);
    return;
  }
  c = s3_config_acquire(s3_fs_of(filesystem));
  *option = plugin_memory_allocate(sizeof **option);
  if (*option != NULL) memset(*option, 0, sizeof **option);
  if (*option == NULL || fill(s, c, *option) != 0) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
  } else {
    TF_SetStatus(status, TF_OK, "");
  }
  s3_config_release(c);
}

void s3_get_configuration_keys(const TF_Filesystem* filesystem, char** keys,
                               int* num_keys, TF_Status* status) {
  int i;
  (void)filesystem;
  if (keys == NULL) {
    *num_keys = NUM_SPECS;
  } else {
    for (i = 0; i < NUM_SPECS && i < *num_keys; ++i)
      keys[i] = plugin_strdup(specs[i].name);
    *num_keys = i;
  }
  TF_SetStatus(status, TF_OK, "");
}
