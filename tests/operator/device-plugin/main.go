// Command nvidia-device-plugin is the operator tier's stand-in for NVIDIA's device plugin: it serves the
// kubelet's device-plugin API (v1beta1) for nvidia.com/gpu with a fixed number of fake devices, so that the
// node's nvidia.com/gpu capacity is the kubelet's, as on a GPU node.
//
// It listens on <dir>/nvidia-gpu.sock, registers the resource with the kubelet at <dir>/kubelet.sock,
// answers ListAndWatch with its devices (all healthy) and Allocate with NVIDIA_VISIBLE_DEVICES naming the
// allocated ones. It exits 0 on SIGTERM (removing its socket) and 1 when the kubelet removes its socket (a
// kubelet restart), so that the container's restart registers it again.
//
// Environment: STANDIN_GPUS (number of devices, default 2), STANDIN_DEVICE_PLUGIN_DIR (default
// /var/lib/kubelet/device-plugins).
package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const (
	resourceName = "nvidia.com/gpu"
	endpointName = "nvidia-gpu.sock"
)

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	devices []*pluginapi.Device
	stop    chan struct{}
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *plugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	log.Printf("ListAndWatch: the kubelet has %d %s device(s)", len(p.devices), resourceName)
	select {
	case <-p.stop:
	case <-s.Context().Done():
	}
	return nil
}

func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		ids := strings.Join(c.DevicesIds, ",")
		log.Printf("Allocate: %s", ids)
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": ids},
		})
	}
	return resp, nil
}

func (p *plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// register tells the kubelet at dir/kubelet.sock about the resource served at dir/endpointName.
func register(dir string) error {
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: endpointName, ResourceName: resourceName,
		Options: &pluginapi.DevicePluginOptions{},
	})
	return err
}

func run() int {
	dir := os.Getenv("STANDIN_DEVICE_PLUGIN_DIR")
	if dir == "" {
		dir = pluginapi.DevicePluginPath
	}
	p := &plugin{stop: make(chan struct{})}
	for i := 0; i < envInt("STANDIN_GPUS", 2); i++ {
		p.devices = append(p.devices, &pluginapi.Device{ID: fmt.Sprintf("GPU-standin-%d", i), Health: pluginapi.Healthy})
	}
	sock := filepath.Join(dir, endpointName)
	if err := os.Remove(sock); err != nil && !os.IsNotExist(err) {
		log.Printf("cannot remove the old socket %s: %v", sock, err)
		return 1
	}
	lis, err := net.Listen("unix", sock)
	if err != nil {
		log.Printf("cannot listen on %s: %v", sock, err)
		return 1
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() { _ = srv.Serve(lis) }()
	defer func() { close(p.stop); srv.Stop(); _ = os.Remove(sock) }()
	if err := register(dir); err != nil {
		log.Printf("cannot register %s with the kubelet: %v", resourceName, err)
		return 1
	}
	log.Printf("registered %s with the kubelet: %d device(s), endpoint %s", resourceName, len(p.devices), sock)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case s := <-sigs:
			log.Printf("%v: stopping", s)
			return 0
		case <-tick.C:
			if _, err := os.Stat(sock); err != nil {
				log.Printf("the kubelet removed %s (it restarted): exiting to register again", sock)
				return 1
			}
		}
	}
}

func main() {
	log.SetFlags(log.LstdFlags | log.LUTC)
	os.Exit(run())
}
