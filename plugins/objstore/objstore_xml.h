/*
 * The XML stores answer with (S3's and Azure's listings, errors, upload
 * ids), read by expat, and XML text written into request bodies.
 */
#ifndef ASYNCFS_OBJSTORE_XML_H_
#define ASYNCFS_OBJSTORE_XML_H_

#include <stddef.h>

#include "plugin_common.h"

/* Called at the end of each element with its name, its parent's name
 * ("" at the top, or deeper than 8 levels) and its text. */
typedef void (*objstore_xml_handler)(void* ctx, const char* name, const char* parent,
                                     const char* text);

/* Parses xml[0, len), calling on_element for every element. Control
 * characters (which XML 1.0 forbids, yet gateways send, raw or as
 * character references) come through in the text as the bytes meant.
 * 0, or -1 when it is not well-formed XML (or memory ran out). */
int objstore_xml_parse(const char* xml, size_t len, objstore_xml_handler on_element, void* ctx);

/* The text of the first element named name (e.g. "UploadId"), malloc'd,
 * or NULL. */
char* objstore_xml_find(const char* xml, size_t len, const char* name);

/* objstore_xml_find of an element found by its tags, without parsing the
 * rest of xml (a listing's next token, to ask for the next page before
 * this one is read): the text of the first <name>...</name> that xml
 * holds, read as the whole document would read it; NULL when there is
 * none, it is empty, or it is not well-formed. Only for elements whose
 * name no other element of the document has. */
char* objstore_xml_peek(const char* xml, size_t len, const char* name);

/* Whether XML 1.0 can carry s: no control character but tab, newline
 * and carriage return (which objstore_xml_escape_into writes as
 * references). */
int objstore_xml_can_carry(const char* s);

/* Appends s to b with XML's five special characters escaped. */
void objstore_xml_escape_into(plugin_buf* b, const char* s);

#endif /* ASYNCFS_OBJSTORE_XML_H_ */
