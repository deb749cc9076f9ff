/*
 * AWS's shared config and credentials files (INI, as botocore reads them).
 * libc only, so tests compile s3_formats.c on its own
 * (tests/stores/test_formats.py) and check it against botocore's reader.
 * JSON and times are the engine's (objstore_formats.h).
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

#endif /* ASYNCFS_S3_FORMATS_H_ */
