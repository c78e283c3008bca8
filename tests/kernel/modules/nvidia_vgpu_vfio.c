// SPDX-License-Identifier: GPL-2.0
/*
 * Stub of nvidia-vgpu-vfio.ko, for the kernel test tier (docs/kernel-tier.md).
 *
 * Modelled: the vGPU host module holds two references on nvidia while it is loaded, only one of which is a
 * holders link (the kernel's link for the nvidia symbols it uses); the other is taken at load without a
 * link (here nvstub_pin(): __module_get on nvidia), so nvidia's count is one higher than "Used by" explains. Both are dropped when it unloads. Not modelled:
 * mediated devices, VFIO.
 */
#include <linux/module.h>

#include "nvstub.h"

static int __init vgpu_init(void)
{
	nvstub_pin();
	return 0;
}

static void __exit vgpu_exit(void)
{
	nvstub_unpin();
}

module_init(vgpu_init);
module_exit(vgpu_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("stub of nvidia-vgpu-vfio.ko for driver-manager's kernel test tier");
