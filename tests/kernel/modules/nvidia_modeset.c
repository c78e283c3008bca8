// SPDX-License-Identifier: GPL-2.0
/*
 * Stub of nvidia-modeset.ko, for the kernel test tier (docs/kernel-tier.md).
 *
 * Modelled (https://github.com/NVIDIA/open-gpu-kernel-modules, kernel-open/nvidia-modeset/nvidia-modeset-linux.c
 * and kernel-open/nvidia/nv-frontend.c): it uses nvidia's exports (nvidia's holders/ lists it) and registers
 * itself with nvidia as the server of /dev/nvidia-modeset (minor 254 of nvidia's major), so that a process
 * holding that node open holds a reference on nvidia_modeset as well as on nvidia. It exports the interface
 * nvidia-drm uses (the real module's KAPI function table), so nvidia_drm is linked to it.
 *
 * For negative tests: pins=N takes N references on nvidia at load that no holders link shows, and drops
 * them at unload (an unexplained reference on nvidia while this module is loaded).
 */
#include <linux/fs.h>
#include <linux/module.h>

#include "nvstub.h"

static int pins;
module_param(pins, int, 0444);
MODULE_PARM_DESC(pins, "references on nvidia taken at load without a holders link (default 0)");

static int modeset_open(struct inode *inode, struct file *file)
{
	return 0;
}

static int modeset_release(struct inode *inode, struct file *file)
{
	return 0;
}

static const struct nvstub_modeset server = {
	.owner = THIS_MODULE,
	.open = modeset_open,
	.release = modeset_release,
};

int nvstub_modeset_api_version(void)
{
	return 1;
}
EXPORT_SYMBOL_GPL(nvstub_modeset_api_version);

static int __init modeset_init(void)
{
	int rc, i;

	if (pins < 0 || pins > 1000)
		return -EINVAL;
	rc = nvstub_register_modeset(&server);
	if (rc)
		return rc;
	for (i = 0; i < pins; i++)
		nvstub_pin();
	return 0;
}

static void __exit modeset_exit(void)
{
	int i;

	for (i = 0; i < pins; i++)
		nvstub_unpin();
	nvstub_unregister_modeset(&server);
}

module_init(modeset_init);
module_exit(modeset_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("stub of nvidia-modeset.ko for driver-manager's kernel test tier");
