/*
 * A plugin's settings, one option system for every plugin: a table of
 * options (integers in a range, or text) describes a plugin-defined struct
 * of values. Every change makes a new immutable snapshot; an operation
 * acquires the snapshot current when it starts and keeps it to the end, so
 * a configuration change never races a request in flight.
 *
 * The ABI's five configuration ops are written here once
 * (PLUGIN_CONFIGURATION_OPS); they find the settings through plugin_fs
 * (plugin_fs.h), which every built-in filesystem starts with.
 */
#ifndef ASYNCFS_PLUGIN_CONFIG_H_
#define ASYNCFS_PLUGIN_CONFIG_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "asyncfs/filesystem_interface.h"

typedef enum plugin_option_type {
  PLUGIN_OPTION_INT,  /* an int64_t field */
  PLUGIN_OPTION_TEXT, /* a char* field, owned by the snapshot */
} plugin_option_type;

typedef struct plugin_option {
  const char* name;
  const char* description;
  plugin_option_type type;
  size_t offset; /* of the field in the plugin's settings struct */
  int64_t min_value; /* integers: the inclusive range */
  int64_t max_value;
  int secret; /* text: reads back as "(set)" or "", never as the value */
} plugin_option;

/* The first member of every settings struct. */
typedef struct plugin_settings {
  int refs;
} plugin_settings;

typedef struct plugin_schema {
  const char* plugin; /* names the plugin in messages: "s3" */
  const plugin_option* options;
  int count;
  size_t size; /* sizeof the settings struct */
} plugin_schema;

typedef struct plugin_config {
  const plugin_schema* schema;
  pthread_mutex_t lock; /* guards current */
  plugin_settings* current;
} plugin_config;

/* Starts from a copy of defaults (text copied, integers clamped to their
 * range). Returns 0, or -1 with status set. */
int plugin_config_init(plugin_config* config, const plugin_schema* schema,
                       const void* defaults, TF_Status* status);
void plugin_config_destroy(plugin_config* config);

/* The current snapshot (a pointer to the settings struct), held until
 * released. */
void* plugin_config_acquire(plugin_config* config);
void plugin_config_release(const plugin_config* config, void* settings);
/* One integer of the current snapshot. */
int64_t plugin_config_int(plugin_config* config, size_t offset);

/* The ABI's configuration ops, for any filesystem built on plugin_fs. */
void plugin_get_configuration(const TF_Filesystem* filesystem,
                              TF_Filesystem_Option** options, int* num_options,
                              TF_Status* status);
void plugin_set_configuration(const TF_Filesystem* filesystem,
                              const TF_Filesystem_Option* options,
                              int num_options, TF_Status* status);
void plugin_get_configuration_option(const TF_Filesystem* filesystem,
                                     const char* key,
                                     TF_Filesystem_Option** option,
                                     TF_Status* status);
void plugin_set_configuration_option(const TF_Filesystem* filesystem,
                                     const TF_Filesystem_Option* option,
                                     TF_Status* status);
void plugin_get_configuration_keys(const TF_Filesystem* filesystem,
                                   char** keys, int* num_keys,
                                   TF_Status* status);

/* A read-only option whose value the plugin works out when asked (where
 * its credentials come from, say): *option holds text, as
 * plugin_get_configuration_option would give a text option. */
/* A read-only option of n integers (a plugin's counters), as
 * plugin_report_text gives a text. */
void plugin_report_ints(TF_Filesystem_Option** option, const char* name, const char* description,
                        const int64_t* values, int n, TF_Status* status);
void plugin_report_text(TF_Filesystem_Option** option, const char* name, const char* description,
                        const char* text, TF_Status* status);

/* Designated initializers for a TF_FilesystemOps table. */
#define PLUGIN_CONFIGURATION_OPS                                            \
  .get_filesystem_configuration = plugin_get_configuration,                \
  .set_filesystem_configuration = plugin_set_configuration,                \
  .get_filesystem_configuration_option = plugin_get_configuration_option, \
  .set_filesystem_configuration_option = plugin_set_configuration_option, \
  .get_filesystem_configuration_keys = plugin_get_configuration_keys

#endif /* ASYNCFS_PLUGIN_CONFIG_H_ */
