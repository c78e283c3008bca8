/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the stub modules of tests/kernel/modules export to each other. Only the shape matters: each symbol a
 * dependant uses makes the kernel link it to its provider (the provider's /sys/module/<m>/holders/ lists it
 * and its reference count includes it), as the real NVIDIA stack's exports do.
 */
#ifndef NVSTUB_H
#define NVSTUB_H

#include <linux/fs.h>
#include <linux/types.h>

struct device;
struct module;

/* nvidia: the server of /dev/nvidia-modeset (minor 254 of major 195), which nvidia_modeset registers. */
struct nvstub_modeset {
	struct module *owner;
	int (*open)(struct inode *inode, struct file *file);
	int (*release)(struct inode *inode, struct file *file);
};
int nvstub_register_modeset(const struct nvstub_modeset *server);
void nvstub_unregister_modeset(const struct nvstub_modeset *server);

/* nvidia: one reference on nvidia that no holders link shows (__module_get / module_put). */
void nvstub_pin(void);
void nvstub_unpin(void);

/* nvidia: how many GPUs it serves, and the stand-in device of GPU `index` (bound to nvidia's driver). */
int nvstub_gpu_count(void);
struct device *nvstub_gpu_device(int index);

/* nvidia: the peer-to-peer interface's entry points, as nvidia_peermem, gdrdrv and nvidia_fs call them. */
int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space, u64 virtual_address, u64 length, void **page_table,
			 void (*free_callback)(void *data), void *data);
int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space, u64 virtual_address, void *page_table);

/* nvidia_modeset: what nvidia_drm asks of it (the real module's KAPI function table). */
int nvstub_modeset_api_version(void);

#endif
