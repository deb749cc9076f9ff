/*
 * The text formats the credential sources answer in: AWS's shared config
 * and credentials files (INI, as botocore reads them), JSON documents
 * (instance metadata, container credentials, credential_process) and
 * ISO 8601 times. libc only, so tests compile s3_formats.c on its own
 * (tests/test_s3_formats.py) and check it against Python's parsers.
 */
#ifndef ASYNCFS_S3_FORMATS_H_
#define ASYNCFS_S3_FORMATS_H_

#include <stddef.h>
#include <stdint.h>

/* The value of key in [section] of an AWS config or credentials file's
 * text, malloc'd, or NULL. Keys are case-insensitive; a key whose value
 * is empty opens a nested block of indented "name = value" lines, read as
 * "key.name" ("s3.addressing_style"). Whole-line comments start with '#'
 * or ';'. *section_found (may be NULL) tells whether the section exists. */
char* s3_ini_get(const char* text, const char* section, const char* key,
                 int* section_found);

/* A top-level member of the JSON object in json[0, len): a string's value
 * (escapes decoded; \u0000 and malformed text give NULL) or a number's or
 * true/false's text, malloc'd; NULL when absent, null, an object or an
 * array, or when the document is not one well-formed object. */
char* s3_json_get(const char* json, size_t len, const char* key);

/* "2026-11-23T10:00:00Z" (fraction and a numeric offset allowed) as Unix
 * seconds; -1 when malformed. */
int64_t s3_parse_time(const char* iso);

#endif /* ASYNCFS_S3_FORMATS_H_ */
