/* tree.h: the tree: order's text as a postfix program (src/standard/tree.c; docs/reference/standard.md, "Trees"). */
#ifndef ER_TREE_H
#define ER_TREE_H

#include <stdint.h>
#include "core/internal.h"

/* The most elements a written tree may have. */
#define ER_TREE_MAX_LEAVES (INT64_C(1) << 18)
/* In a postfix program: an addition of the two values on top of the stack (every other entry is an element's index). */
#define ER_TREE_ADD (-1)

typedef struct er_tree {
    int32_t *post;  /* the postfix program: leaves >= 0, ER_TREE_ADD */
    int64_t npost;  /* 2 leaves - 1 entries */
    int64_t leaves; /* the elements, each named once: 0 .. leaves - 1 */
} er_tree;

/* Parses one tree from text (the text after "tree:"), expanding repetitions, and checks that it names each of the
 * elements 0 .. n - 1 once. *end (if not NULL) receives the first character after the tree. t may be NULL (a check
 * alone). ER_ERR_STANDARD with the place and the reason on a refusal; t is then untouched. */
ER_INTERNAL er_status er__tree_parse(const char *text, er_tree *t, const char **end);
ER_INTERNAL void er__tree_free(er_tree *t);
/* The tree's canonical text (malloc'd, NUL-terminated; *len its length): each addition's larger operand first (the
 * one holding the lower element where both are as large), chains written as lists, and runs of a subtree shifted by a
 * constant stride written X*C+S. Two texts of one tree render alike. */
ER_INTERNAL er_status er__tree_render(const er_tree *t, char **text, size_t *len);
/* The most additions any element passes through (the tree's height). */
ER_INTERNAL int64_t er__tree_depth(const er_tree *t);

#endif
