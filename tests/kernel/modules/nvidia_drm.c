// SPDX-License-Identifier: GPL-2.0
/*
 * Stub of nvidia-drm.ko, for the kernel test tier (docs/kernel-tier.md).
 *
 * Modelled (https://github.com/NVIDIA/open-gpu-kernel-modules, kernel-open/nvidia-drm/nvidia-drm-drv.c):
 * it uses nvidia_modeset's interface (nvidia_modeset's holders/ lists nvidia_drm) and the kernel's DRM core
 * (drm.ko: drm's holders/ lists nvidia_drm too), and registers one real DRM device (drm_dev_alloc,
 * drm_dev_register, GEM and render node), so /dev/dri/card0 (major 226, "drm" in /proc/devices) and
 * /dev/dri/renderD128 exist, and a process holding either open holds a reference on nvidia_drm (the DRM
 * core swaps in this module's file operations on open).
 *
 * Where the DRM device hangs in sysfs (its parent, whose driver names a module through
 * /sys/dev/char/226:N/device/driver/module):
 * - default: its own platform device "nvidia-drm.0", bound to this module's platform driver "nvidia-drm",
 *   so the link resolves to nvidia_drm;
 * - gpu_parent=1: the GPU's device, which nvidia's driver is bound to, as the real nvidia-drm does (it
 *   allocates the DRM device on the GPU's PCI device): the link resolves to nvidia.
 * Not modelled: modesetting, framebuffers, fbdev, any ioctl beyond the DRM core's own.
 */
#include <linux/module.h>
#include <linux/platform_device.h>

#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_ioctl.h>

#include "nvstub.h"

static bool gpu_parent;
module_param(gpu_parent, bool, 0444);
MODULE_PARM_DESC(gpu_parent, "parent the DRM device on nvidia's GPU device (as the real module) instead of nvidia-drm.0");

DEFINE_DRM_GEM_FOPS(nvdrm_fops);

static const struct drm_driver nvdrm_driver = {
	.driver_features = DRIVER_GEM | DRIVER_RENDER,
	.fops = &nvdrm_fops,
	.name = "nvidia-drm",
	.desc = "NVIDIA DRM driver (stub)",
	.date = "20240101",
	.major = 0,
	.minor = 1,
};

static struct drm_device *nvdrm;
static struct platform_device *nvdrm_pdev;
static bool nvdrm_driver_registered;

static int nvdrm_add(struct device *parent)
{
	struct drm_device *drm;
	int rc;

	pr_info("nvidia_drm: nvidia_modeset interface %d\n", nvstub_modeset_api_version());
	drm = drm_dev_alloc(&nvdrm_driver, parent);
	if (IS_ERR(drm))
		return PTR_ERR(drm);
	rc = drm_dev_register(drm, 0);
	if (rc) {
		drm_dev_put(drm);
		return rc;
	}
	nvdrm = drm;
	return 0;
}

static void nvdrm_remove_device(void)
{
	if (!nvdrm)
		return;
	drm_dev_unregister(nvdrm);
	drm_dev_put(nvdrm);
	nvdrm = NULL;
}

static int nvdrm_probe(struct platform_device *pdev)
{
	return nvdrm_add(&pdev->dev);
}

static int nvdrm_remove(struct platform_device *pdev)
{
	nvdrm_remove_device();
	return 0;
}

static struct platform_driver nvdrm_platform_driver = {
	.probe = nvdrm_probe,
	.remove = nvdrm_remove,
	.driver = { .name = "nvidia-drm" },
};

static void nvdrm_cleanup(void)
{
	if (nvdrm_pdev)
		platform_device_unregister(nvdrm_pdev);
	nvdrm_pdev = NULL;
	if (nvdrm_driver_registered)
		platform_driver_unregister(&nvdrm_platform_driver);
	nvdrm_driver_registered = false;
	nvdrm_remove_device();
}

static int __init nvdrm_init(void)
{
	struct device *gpu;
	int rc;

	if (gpu_parent) {
		gpu = nvstub_gpu_device(0);
		return gpu ? nvdrm_add(gpu) : -ENODEV;
	}
	rc = platform_driver_register(&nvdrm_platform_driver);
	if (rc)
		return rc;
	nvdrm_driver_registered = true;
	nvdrm_pdev = platform_device_register_simple("nvidia-drm", 0, NULL, 0);
	if (IS_ERR(nvdrm_pdev)) {
		rc = PTR_ERR(nvdrm_pdev);
		nvdrm_pdev = NULL;
	} else if (!nvdrm) {
		rc = -ENODEV; /* the probe failed */
	}
	if (rc)
		nvdrm_cleanup();
	return rc;
}

static void __exit nvdrm_exit(void)
{
	nvdrm_cleanup();
}

module_init(nvdrm_init);
module_exit(nvdrm_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("stub of nvidia-drm.ko for driver-manager's kernel test tier");
