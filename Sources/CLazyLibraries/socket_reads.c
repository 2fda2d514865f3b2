#define _GNU_SOURCE
#include "CLazyLibraries.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/*
 * libmosquitto reads a packet's fixed header a byte per read(2): a command byte, then each byte of the remaining
 * length, then the rest. A small QoS 1 report costs four system calls before it is handled. Its import of read(2) is
 * pointed here: on a thread that follows a socket (`thing_agent_socket_buffer_follow`), the library's reads of that
 * socket are served from 64 KiB filled by one read(2) at a time; every other read passes straight to the C library.
 */

enum { capacity = 64 * 1024 };

struct socket_buffer {
    int socket;
    size_t start;
    size_t end;
    unsigned char bytes[capacity];
};

/* This thread's buffer; each client's network thread takes its own, so no lock is needed. */
static __thread struct socket_buffer *this_thread;

static ssize_t buffered_read(int descriptor, void *destination, size_t count) {
    struct socket_buffer *buffer = this_thread;
    if (buffer == NULL || descriptor != buffer->socket || count == 0) return read(descriptor, destination, count);
    if (buffer->start == buffer->end) {
        if (count >= capacity) return read(descriptor, destination, count);
        ssize_t got = read(descriptor, buffer->bytes, capacity);
        /* End of stream, EAGAIN or an error: the library sees it as if it had read itself (errno untouched). */
        if (got <= 0) return got;
        buffer->start = 0;
        buffer->end = (size_t)got;
    }
    size_t taken = buffer->end - buffer->start < count ? buffer->end - buffer->start : count;
    memcpy(destination, buffer->bytes + buffer->start, taken);
    buffer->start += taken;
    return (ssize_t)taken;
}

void thing_agent_socket_buffer_follow(int socket) {
    if (this_thread != NULL && this_thread->socket == socket) return;
    if (this_thread == NULL) {
        if (socket < 0) return;
        this_thread = malloc(sizeof *this_thread);
        if (this_thread == NULL) return; /* the library then reads unbuffered */
    }
    this_thread->socket = socket;
    this_thread->start = 0;
    this_thread->end = 0;
}

size_t thing_agent_socket_buffer_pending(void) {
    return this_thread == NULL ? 0 : this_thread->end - this_thread->start;
}

void thing_agent_socket_buffer_release(void) {
    free(this_thread);
    this_thread = NULL;
}

/* --- Pointing one import of a loaded library at another function ------------------------------------------- */

/* A dynamic-section address: glibc relocates them in place on most architectures, not on all. */
static uintptr_t absolute(uintptr_t base, uintptr_t address) {
    return address < base ? base + address : address;
}

struct relro_search {
    uintptr_t base;
    uintptr_t page;
    uintptr_t page_size;
    int found;
};

/* Whether the slot's page is one the loader made read-only: the RELRO segment's whole pages only (glibc rounds both
 * ends down), so a page it shares with writable data stays writable. */
static int find_relro(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct relro_search *search = data;
    if (info->dlpi_addr != search->base) return 0;
    uintptr_t mask = ~(search->page_size - 1);
    for (int index = 0; index < info->dlpi_phnum; index++) {
        const ElfW(Phdr) *header = &info->dlpi_phdr[index];
        if (header->p_type != PT_GNU_RELRO) continue;
        uintptr_t start = (info->dlpi_addr + header->p_vaddr) & mask;
        uintptr_t end = (info->dlpi_addr + header->p_vaddr + header->p_memsz) & mask;
        if (search->page >= start && search->page + search->page_size <= end) search->found = 1;
    }
    return 1;
}

/* Writes `value` into the import slot at `slot`, making its page writable for the write; 0, or -1. */
static int write_slot(uintptr_t base, uintptr_t slot, void *value, uintptr_t page_size) {
    uintptr_t page = slot & ~(page_size - 1);
    if (mprotect((void *)page, page_size, PROT_READ | PROT_WRITE) != 0) return -1;
    __atomic_store_n((void **)slot, value, __ATOMIC_RELEASE);
    struct relro_search search = {.base = base, .page = page, .page_size = page_size, .found = 0};
    dl_iterate_phdr(find_relro, &search);
    if (search.found) mprotect((void *)page, page_size, PROT_READ);
    return 0;
}

static int is_import_slot(uint32_t type) {
#if defined(__x86_64__) && defined(__LP64__)
    return type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT;
#elif defined(__aarch64__) && defined(__LP64__)
    return type == R_AARCH64_JUMP_SLOT || type == R_AARCH64_GLOB_DAT;
#else
    (void)type;
    return 0;
#endif
}

/* Writes `replacement` into every slot through which `library` calls `symbol`; how many, or -1. */
static int point_import(void *library, const char *symbol, void *replacement, const char **failure) {
    struct link_map *map = NULL;
    if (dlinfo(library, RTLD_DI_LINKMAP, &map) != 0 || map == NULL) {
        *failure = "the library's link map is not available";
        return -1;
    }
    uintptr_t base = map->l_addr;
    const ElfW(Sym) *symbols = NULL;
    const char *names = NULL;
    const ElfW(Rela) *tables[2] = {NULL, NULL};
    size_t sizes[2] = {0, 0};
    int rela = 1;
    for (const ElfW(Dyn) *entry = map->l_ld; entry->d_tag != DT_NULL; entry++) {
        switch (entry->d_tag) {
        case DT_SYMTAB: symbols = (const ElfW(Sym) *)absolute(base, entry->d_un.d_ptr); break;
        case DT_STRTAB: names = (const char *)absolute(base, entry->d_un.d_ptr); break;
        case DT_JMPREL: tables[0] = (const ElfW(Rela) *)absolute(base, entry->d_un.d_ptr); break;
        case DT_PLTRELSZ: sizes[0] = entry->d_un.d_val; break;
        case DT_RELA: tables[1] = (const ElfW(Rela) *)absolute(base, entry->d_un.d_ptr); break;
        case DT_RELASZ: sizes[1] = entry->d_un.d_val; break;
        case DT_PLTREL: rela = entry->d_un.d_val == DT_RELA; break;
        }
    }
    if (symbols == NULL || names == NULL || !rela) {
        *failure = "the library's relocations are not in a known form";
        return -1;
    }
    uintptr_t page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    /* What each written slot held, to put back if a later one cannot be written: all or none. */
    enum { most = 8 };
    uintptr_t slots[most];
    void *previous[most];
    int written = 0;
    for (int table = 0; table < 2; table++) {
        if (tables[table] == NULL) continue;
        for (size_t index = 0; index < sizes[table] / sizeof(ElfW(Rela)); index++) {
            const ElfW(Rela) *relocation = &tables[table][index];
            if (!is_import_slot((uint32_t)ELF64_R_TYPE(relocation->r_info))) continue;
            const ElfW(Sym) *entry = &symbols[ELF64_R_SYM(relocation->r_info)];
            if (strcmp(names + entry->st_name, symbol) != 0) continue;
            uintptr_t slot = base + relocation->r_offset;
            void *old = __atomic_load_n((void **)slot, __ATOMIC_ACQUIRE);
            if (old == replacement) continue; /* the same slot listed twice */
            if (written == most || write_slot(base, slot, replacement, page_size) != 0) {
                while (written > 0) {
                    written--;
                    write_slot(base, slots[written], previous[written], page_size);
                }
                *failure = "the library's import table cannot be written";
                return -1;
            }
            slots[written] = slot;
            previous[written] = old;
            written++;
        }
    }
    if (written == 0) *failure = "the library imports no such function";
    return written;
}

/*
 * libmosquitto makes a socket pair per client for `mosquitto_loop`'s select(2) to wake on, and writes a byte into it
 * for every packet it queues: a system call per PUBACK, failing with EAGAIN once the pair is full, since this
 * client runs its own loop and never reads it. The library goes on without the pair when socketpair(2) fails (a
 * warning in its log, then no byte written), so its import of socketpair is pointed at this.
 */
static int no_socket_pair(int domain, int type, int protocol, int sv[2]) {
    (void)domain, (void)type, (void)protocol, (void)sv;
    errno = EOPNOTSUPP;
    return -1;
}

/* Points libmosquitto's import of `symbol` at `replacement`: NULL, or why not. */
static const char *point_mosquitto_import(const char *symbol, void *replacement) {
#if !(defined(__x86_64__) || defined(__aarch64__)) || !defined(__LP64__)
    (void)symbol, (void)replacement;
    return "not on this architecture";
#else
    const char *failure = thing_agent_load_mosquitto();
    if (failure != NULL) return failure;
    /* Already loaded: this only finds its handle. */
    void *library = dlopen(THING_AGENT_MOSQUITTO_SONAME, RTLD_NOW | RTLD_NOLOAD);
    if (library == NULL) return "libmosquitto is not loaded";
    int written = point_import(library, symbol, replacement, &failure);
    dlclose(library);
    return written > 0 ? NULL : failure;
#endif
}

const char *thing_agent_skip_mosquitto_wake_pipe(void) {
    return point_mosquitto_import("socketpair", (void *)no_socket_pair);
}

const char *thing_agent_buffer_mosquitto_reads(void) {
    return point_mosquitto_import("read", (void *)buffered_read);
}
