/*
 * objcheck.c — an ELF shared object's tables and contents against its size
 * (objcheck.h).  Headers are copied out with memcpy: the bytes of a
 * compiled model file's object need not be aligned.
 */
#include "backend/cpu/objcheck.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#endif

/* Does [off, off + count * size) end at or before len?  Overflow-safe. */
static bool fits(uint64_t off, uint64_t count, uint64_t size, size_t len) {
  if (off > len) return false;
  if (size != 0 && count > (len - off) / size) return false;
  return true;
}

static fsl_status past_end(const char *what, const char *part, uint64_t end_or_off, size_t len) {
  return fsl_errorf(FSL_ERR_RUNTIME, "the shared object %s is cut short or malformed: its %s reaches past its end "
                    "(%llu > %zu bytes)", what, part, (unsigned long long)end_or_off, len);
}

static fsl_status bad_field(const char *what, const char *field) {
  return fsl_errorf(FSL_ERR_RUNTIME, "the shared object %s is not a %s for this machine: wrong %s", what,
                    "64-bit little-endian ELF shared object", field);
}

fsl_status fsl_cpu_elf_check(const void *p, size_t len, const char *what) {
  const unsigned char *b = p;
  Elf64_Ehdr eh;
  if (b && len >= SELFMAG && memcmp(b, ELFMAG, SELFMAG) != 0) return bad_field(what, "magic number");
  if (!b || len < sizeof eh) return past_end(what, "ELF header", sizeof eh, len);
  memcpy(&eh, b, sizeof eh);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) return bad_field(what, "class");
  if (eh.e_ident[EI_DATA] != ELFDATA2LSB) return bad_field(what, "byte order");
  if (eh.e_type != ET_DYN) return bad_field(what, "type");
#ifdef HOST_MACHINE
  if (eh.e_machine != HOST_MACHINE) return bad_field(what, "machine");
#endif
  if (eh.e_ehsize < sizeof eh) return bad_field(what, "ELF header size");
  if (eh.e_phnum == 0 || eh.e_phentsize != sizeof(Elf64_Phdr)) return bad_field(what, "program header table");
  if (!fits(eh.e_phoff, eh.e_phnum, sizeof(Elf64_Phdr), len))
    return past_end(what, "program header table", eh.e_phoff + (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr), len);
  for (unsigned i = 0; i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    memcpy(&ph, b + eh.e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
    if (!fits(ph.p_offset, 1, ph.p_filesz, len)) {
      char part[48];
      snprintf(part, sizeof part, "segment %u", i);
      return past_end(what, part, ph.p_offset + ph.p_filesz, len);
    }
  }
  /* Section headers: a linker always writes them for a shared object; an
   * object without them (e_shoff 0) is what a truncation would leave only
   * if it also rewrote the header, so it is refused as well. */
  if (eh.e_shoff == 0 || eh.e_shentsize != sizeof(Elf64_Shdr)) return bad_field(what, "section header table");
  if (!fits(eh.e_shoff, 1, sizeof(Elf64_Shdr), len)) return past_end(what, "section header table", eh.e_shoff, len);
  uint64_t shnum = eh.e_shnum;
  if (shnum == 0) { /* SHN_UNDEF's sh_size holds the count when it is >= SHN_LORESERVE */
    Elf64_Shdr s0;
    memcpy(&s0, b + eh.e_shoff, sizeof s0);
    shnum = s0.sh_size;
  }
  if (!fits(eh.e_shoff, shnum, sizeof(Elf64_Shdr), len))
    return past_end(what, "section header table", eh.e_shoff + shnum * sizeof(Elf64_Shdr), len);
  for (uint64_t i = 0; i < shnum; i++) {
    Elf64_Shdr sh;
    memcpy(&sh, b + eh.e_shoff + i * sizeof sh, sizeof sh);
    if (sh.sh_type != SHT_NOBITS && !fits(sh.sh_offset, 1, sh.sh_size, len)) {
      char part[48];
      snprintf(part, sizeof part, "section %llu", (unsigned long long)i);
      return past_end(what, part, sh.sh_offset + sh.sh_size, len);
    }
  }
  return FSL_OK;
}

fsl_status fsl_cpu_elf_check_file(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fsl_errorf(FSL_ERR_RUNTIME, "cannot open the shared object '%s': %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return fsl_errorf(FSL_ERR_RUNTIME, "cannot stat the shared object '%s': %s", path, strerror(err));
  }
  size_t len = st.st_size > 0 ? (size_t)st.st_size : 0;
  void *m = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  int err = errno;
  close(fd);
  if (len && m == MAP_FAILED) return fsl_errorf(FSL_ERR_RUNTIME, "cannot map the shared object '%s': %s", path,
                                                strerror(err));
  char what[1040];
  snprintf(what, sizeof what, "'%s'", path);
  fsl_status s = fsl_cpu_elf_check(len ? m : NULL, len, what);
  if (len) munmap(m, len);
  return s;
}
