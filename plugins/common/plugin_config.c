/* Settings snapshots and the ABI's five configuration ops (see
 * plugin_config.h). */
#define _POSIX_C_SOURCE 200809L
#include "plugin_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_common.h"
#include "plugin_fork.h"
#include "plugin_state.h"

static char** text_field(void* settings, const plugin_option* o) {
  return (char**)((char*)settings + o->offset);
}

static int64_t* int_field(void* settings, const plugin_option* o) {
  return (int64_t*)((char*)settings + o->offset);
}

static void settings_free(const plugin_schema* schema, plugin_settings* s) {
  int i;
  for (i = 0; i < schema->count; ++i)
    if (schema->options[i].type == PLUGIN_OPTION_TEXT)
      free(*text_field(s, &schema->options[i]));
  free(s);
}

/* A private copy of src with one reference; NULL when out of memory. */
static plugin_settings* settings_copy(const plugin_schema* schema,
                                      const void* src) {
  plugin_settings* s = malloc(schema->size);
  int i;
  if (s == NULL) return NULL;
  memcpy(s, src, schema->size);
  s->refs = 1;
  for (i = 0; i < schema->count; ++i) {
    const plugin_option* o = &schema->options[i];
    char** f;
    if (o->type != PLUGIN_OPTION_TEXT) continue;
    f = text_field(s, o);
    *f = strdup(*f != NULL ? *f : "");
    if (*f == NULL) {
      while (--i >= 0)
        if (schema->options[i].type == PLUGIN_OPTION_TEXT)
          free(*text_field(s, &schema->options[i]));
      free(s);
      return NULL;
    }
  }
  return s;
}

int plugin_config_init(plugin_config* config, const plugin_schema* schema,
                       const void* defaults, TF_Status* status) {
  int i;
  config->schema = schema;
  config->current = settings_copy(schema, defaults);
  if (config->current == NULL ||
      pthread_mutex_init(&config->lock, NULL) != 0 ||
      plugin_fork_guard_mutex(&config->lock, PLUGIN_LOCK_SETTINGS) != 0) {
    if (config->current != NULL) settings_free(schema, config->current);
    config->current = NULL;
    plugin_set_oom(status);
    return -1;
  }
  for (i = 0; i < schema->count; ++i) {
    const plugin_option* o = &schema->options[i];
    int64_t* f;
    if (o->type != PLUGIN_OPTION_INT) continue;
    f = int_field(config->current, o);
    if (*f < o->min_value) *f = o->min_value;
    if (*f > o->max_value) *f = o->max_value;
  }
  return 0;
}

void plugin_config_destroy(plugin_config* config) {
  if (config->current == NULL) return;
  plugin_config_release(config, config->current);
  config->current = NULL;
  plugin_fork_unguard(&config->lock);
  pthread_mutex_destroy(&config->lock);
}

void* plugin_config_acquire(plugin_config* config) {
  plugin_settings* s;
  pthread_mutex_lock(&config->lock);
  s = config->current;
  __atomic_add_fetch(&s->refs, 1, __ATOMIC_ACQ_REL);
  pthread_mutex_unlock(&config->lock);
  return s;
}

void plugin_config_release(const plugin_config* config, void* settings) {
  plugin_settings* s = settings;
  if (s != NULL && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0)
    settings_free(config->schema, s);
}

int64_t plugin_config_int(plugin_config* config, size_t offset) {
  int64_t value;
  pthread_mutex_lock(&config->lock);
  value = *(const int64_t*)((const char*)config->current + offset);
  pthread_mutex_unlock(&config->lock);
  return value;
}

/* ---- the ABI's configuration ops ----------------------------------------- */

static plugin_config* config_of(const TF_Filesystem* filesystem) {
  return &plugin_fs_of(filesystem)->config;
}

static const plugin_option* find_option(const plugin_schema* schema,
                                        const char* name) {
  int i;
  for (i = 0; i < schema->count; ++i)
    if (strcmp(schema->options[i].name, name) == 0) return &schema->options[i];
  return NULL;
}

static void set_no_option(const plugin_schema* schema, const char* name,
                          TF_Status* status) {
  char msg[256];
  snprintf(msg, sizeof msg, "%s: no configuration option named '%.64s'",
           schema->plugin, name != NULL ? name : "");
  TF_SetStatus(status, TF_NOT_FOUND, msg);
}

/* Writes option o of settings into out, deep-allocated for the core. */
static int fill(const plugin_option* o, void* settings,
                TF_Filesystem_Option* out) {
  TF_Filesystem_Option_Value_Union* v;
  out->name = plugin_strdup(o->name);
  out->description = plugin_strdup(o->description);
  out->per_file = 0;
  out->value = plugin_memory_allocate(sizeof *out->value);
  v = plugin_memory_allocate(sizeof *v);
  if (out->name == NULL || out->description == NULL || out->value == NULL ||
      v == NULL) {
    plugin_memory_free(v);
    return -1;
  }
  out->value->num_values = 1;
  out->value->values = v;
  if (o->type == PLUGIN_OPTION_INT) {
    out->value->type_tag = TF_Filesystem_Option_Type_Int;
    v->int_val = *int_field(settings, o);
    return 0;
  }
  {
    const char* text = *text_field(settings, o);
    size_t n;
    if (o->secret) text = *text != '\0' ? "(set)" : "";
    n = strlen(text);
    out->value->type_tag = TF_Filesystem_Option_Type_Buffer;
    v->buffer_val.buf_length = (int)n;
    v->buffer_val.buf = plugin_memory_allocate(n + 1);
    if (v->buffer_val.buf == NULL) return -1;
    memcpy(v->buffer_val.buf, text, n + 1);
  }
  return 0;
}

/* Applies one option to settings (a private copy). */
static int apply(const plugin_schema* schema, void* settings,
                 const TF_Filesystem_Option* in, TF_Status* status) {
  char msg[256];
  const plugin_option* o =
      in != NULL && in->name != NULL ? find_option(schema, in->name) : NULL;
  const TF_Filesystem_Option_Value* v = in != NULL ? in->value : NULL;
  int is_int;
  if (o == NULL) {
    set_no_option(schema, in != NULL ? in->name : NULL, status);
    return -1;
  }
  is_int = o->type == PLUGIN_OPTION_INT;
  if (v == NULL || v->num_values != 1 || v->values == NULL ||
      v->type_tag != (is_int ? TF_Filesystem_Option_Type_Int
                             : TF_Filesystem_Option_Type_Buffer)) {
    snprintf(msg, sizeof msg, "%s: option '%s' takes exactly one %s",
             schema->plugin, o->name, is_int ? "integer" : "string");
    TF_SetStatus(status, TF_INVALID_ARGUMENT, msg);
    return -1;
  }
  if (is_int) {
    int64_t n = v->values[0].int_val;
    if (n < o->min_value || n > o->max_value) {
      snprintf(msg, sizeof msg, "%s: option '%s' must be in [%lld, %lld], got %lld",
               schema->plugin, o->name, (long long)o->min_value,
               (long long)o->max_value, (long long)n);
      TF_SetStatus(status, TF_INVALID_ARGUMENT, msg);
      return -1;
    }
    *int_field(settings, o) = n;
  } else {
    int n = v->values[0].buffer_val.buf_length;
    char* text = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (text == NULL) {
      snprintf(msg, sizeof msg, "%s: option '%s' has a bad string",
               schema->plugin, o->name);
      TF_SetStatus(status, TF_INVALID_ARGUMENT, msg);
      return -1;
    }
    if (n > 0) memcpy(text, v->values[0].buffer_val.buf, (size_t)n);
    text[n] = '\0';
    free(*text_field(settings, o));
    *text_field(settings, o) = text;
  }
  return 0;
}

void plugin_set_configuration(const TF_Filesystem* filesystem,
                              const TF_Filesystem_Option* options,
                              int num_options, TF_Status* status) {
  plugin_config* config = config_of(filesystem);
  plugin_settings* next;
  plugin_settings* old;
  int i;
  pthread_mutex_lock(&config->lock);
  next = settings_copy(config->schema, config->current);
  if (next == NULL) {
    pthread_mutex_unlock(&config->lock);
    plugin_set_oom(status);
    return;
  }
  for (i = 0; i < num_options; ++i) {
    if (apply(config->schema, next, &options[i], status) != 0) {
      pthread_mutex_unlock(&config->lock);
      settings_free(config->schema, next);
      return; /* all or nothing */
    }
  }
  old = config->current;
  config->current = next;
  pthread_mutex_unlock(&config->lock);
  plugin_config_release(config, old);
  plugin_set_ok(status);
}

void plugin_set_configuration_option(const TF_Filesystem* filesystem,
                                     const TF_Filesystem_Option* option,
                                     TF_Status* status) {
  plugin_set_configuration(filesystem, option, 1, status);
}

void plugin_get_configuration(const TF_Filesystem* filesystem,
                              TF_Filesystem_Option** options, int* num_options,
                              TF_Status* status) {
  plugin_config* config = config_of(filesystem);
  const plugin_schema* schema = config->schema;
  void* settings = plugin_config_acquire(config);
  int i;
  *options = plugin_memory_allocate((size_t)schema->count * sizeof **options);
  *num_options = schema->count;
  plugin_set_ok(status);
  for (i = 0; i < schema->count; ++i) {
    if (*options == NULL || fill(&schema->options[i], settings, &(*options)[i]) != 0) {
      plugin_set_oom(status);
      break;
    }
  }
  plugin_config_release(config, settings);
}

void plugin_get_configuration_option(const TF_Filesystem* filesystem,
                                     const char* key,
                                     TF_Filesystem_Option** option,
                                     TF_Status* status) {
  plugin_config* config = config_of(filesystem);
  const plugin_option* o = find_option(config->schema, key);
  void* settings;
  *option = NULL;
  if (o == NULL) {
    set_no_option(config->schema, key, status);
    return;
  }
  settings = plugin_config_acquire(config);
  *option = plugin_memory_allocate(sizeof **option);
  if (*option == NULL || fill(o, settings, *option) != 0) {
    plugin_set_oom(status);
  } else {
    plugin_set_ok(status);
  }
  plugin_config_release(config, settings);
}

void plugin_get_configuration_keys(const TF_Filesystem* filesystem,
                                   char** keys, int* num_keys,
                                   TF_Status* status) {
  const plugin_schema* schema = config_of(filesystem)->schema;
  int i;
  if (keys == NULL) {
    *num_keys = schema->count;
  } else {
    for (i = 0; i < schema->count && i < *num_keys; ++i)
      keys[i] = plugin_strdup(schema->options[i].name);
    *num_keys = i;
  }
  plugin_set_ok(status);
}

void plugin_report_ints(TF_Filesystem_Option** option, const char* name, const char* description,
                        const int64_t* values, int n, TF_Status* status) {
  TF_Filesystem_Option* out = plugin_memory_allocate(sizeof *out);
  TF_Filesystem_Option_Value_Union* v = plugin_memory_allocate(sizeof *v * (size_t)(n > 0 ? n : 1));
  int i;
  *option = out;
  if (out == NULL || v == NULL) {
    plugin_memory_free(v);
    plugin_set_oom(status);
    return;
  }
  out->name = plugin_strdup(name);
  out->description = plugin_strdup(description);
  out->per_file = 0;
  out->value = plugin_memory_allocate(sizeof *out->value);
  if (out->name == NULL || out->description == NULL || out->value == NULL) {
    plugin_memory_free(v);
    plugin_set_oom(status);
    return;
  }
  out->value->type_tag = TF_Filesystem_Option_Type_Int;
  out->value->num_values = n;
  out->value->values = v;
  for (i = 0; i < n; ++i) v[i].int_val = values[i];
  plugin_set_ok(status);
}

void plugin_report_text(TF_Filesystem_Option** option, const char* name, const char* description,
                        const char* text, TF_Status* status) {
  plugin_option o = {name, description, PLUGIN_OPTION_TEXT, 0, 0, 0, 0};
  const char* settings = text; /* the one text field, at offset 0 */
  *option = plugin_memory_allocate(sizeof **option);
  if (*option == NULL || fill(&o, &settings, *option) != 0) plugin_set_oom(status);
  else plugin_set_ok(status);
}
