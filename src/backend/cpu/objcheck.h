/*
 * objcheck.h — does a shared object's ELF image lie inside its bytes?
 *
 * dlopen reads only the ELF header, the program headers and the loadable
 * segments; a file cut short after them (its section headers and symbol
 * tables gone) loads and runs.  GNU ld 2.40 under a file-size limit
 * (RLIMIT_FSIZE with SIGXFSZ ignored, as on a full disk) has been seen to
 * write such a file and exit 0 (bench/results/softmax-exp-le0-intel.md), so
 * the CPU backend checks every object it is about to trust: a fresh one
 * before it becomes a cache entry, a cache entry before it is loaded, and
 * a compiled model file's object before it is loaded (compile.c).
 */
#ifndef FSL_CPU_OBJCHECK_H
#define FSL_CPU_OBJCHECK_H

#include "core/core.h"

/**
 * Checks that `len` bytes at `p` are a whole 64-bit little-endian ELF shared
 * object of this machine's architecture: the ELF header, the program
 * header table, every segment's file bytes (p_offset + p_filesz), the
 * section header table (including an extended section count, ELF gABI
 * "Sections") and every section's file bytes other than SHT_NOBITS
 * (sh_offset + sh_size) end at or before `len` (all sums checked for
 * overflow).  Semantics: the System V ABI's ELF chapter (gABI 4.1) and
 * glibc's <elf.h>.  `what` names the object in the message.
 * Errors: FSL_ERR_RUNTIME naming `what`, the first table or entry that
 * reaches past the end (with both sizes in bytes), or the header field that
 * is wrong (magic, class, byte order, type, machine, entry sizes).
 */
fsl_status fsl_cpu_elf_check(const void *p, size_t len, const char *what);

/**
 * fsl_cpu_elf_check on the file at `path` (mapped read-only).
 * Errors: FSL_ERR_RUNTIME when the file cannot be opened or mapped (the
 * errno text in the message), or as fsl_cpu_elf_check.
 */
fsl_status fsl_cpu_elf_check_file(const char *path);

#endif
