package armtest

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
)

// Microsoft.Compute images: managed images and Compute Gallery image versions the tests seed
// (AddImage), and the marketplace images the server knows.

type image struct {
	id       string
	version  bool // a gallery image version; else a managed image
	location string
	tags     map[string]string
	added    time.Time
}

var (
	managedImageID = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/([^/]+)/providers/Microsoft\.Compute/images/[^/]+$`)
	galleryImageID = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/([^/]+)/providers/Microsoft\.Compute/galleries/[^/]+` +
		`/images/[^/]+/versions/([0-9]+)\.([0-9]+)\.([0-9]+)$`)
)

// AddImage seeds an image in the server's location: a managed image
// (/subscriptions/{s}/resourceGroups/{g}/providers/Microsoft.Compute/images/{name}) or a Compute
// Gallery image version (.../galleries/{g}/images/{definition}/versions/{major.minor.patch}), in
// the server's subscription, where its resource group is created when missing, or in an added
// tenant's (AddTenant). Scale sets and virtual machines can then reference it by ID (a gallery
// image definition's ID picks its highest version), and GET returns it with tags.
func (s *Server) AddImage(id string, tags map[string]string) error {
	var group string
	version := false
	if m := galleryImageID.FindStringSubmatch(id); m != nil {
		group, version = m[1], true
	} else if m := managedImageID.FindStringSubmatch(id); m != nil {
		group = m[1]
	} else {
		return fmt.Errorf("armtest: %q is neither a managed image ID (.../providers/Microsoft.Compute/images/NAME) nor a gallery image version ID "+
			"(.../galleries/G/images/I/versions/X.Y.Z)", id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch subscription := strings.Split(id, "/")[2]; s.tenantOf(subscription) {
	case "":
		return fmt.Errorf("armtest: image %s is in subscription %s, neither the server's (%s) nor an added tenant's (AddTenant)", id, subscription,
			s.opts.SubscriptionID)
	case s.opts.TenantID:
		s.addGroup(group)
	}
	s.images[strings.ToLower(id)] = &image{id: id, version: version, location: s.opts.Location, tags: tags, added: time.Now().UTC()}
	return nil
}

// resolveImage returns the ID of the image a scale set references; s.mu is held.
func (s *Server) resolveImage(ref string) (string, *apiError) {
	if im := s.images[strings.ToLower(ref)]; im != nil {
		return im.id, nil
	}
	var best *image
	var bestVersion [3]int
	prefix := strings.ToLower(ref) + "/versions/"
	for key, im := range s.images {
		if !im.version || !strings.HasPrefix(key, prefix) {
			continue
		}
		m := galleryImageID.FindStringSubmatch(im.id)
		var v [3]int
		for i := range v {
			v[i], _ = strconv.Atoi(m[2+i])
		}
		if best == nil || v[0] > bestVersion[0] || v[0] == bestVersion[0] && (v[1] > bestVersion[1] || v[1] == bestVersion[1] && v[2] > bestVersion[2]) {
			best, bestVersion = im, v
		}
	}
	if best == nil {
		return "", newError(http.StatusNotFound, "NotFound", "The Image '%s' cannot be found in '%s' region.", ref, s.opts.Location)
	}
	return best.id, nil
}

// Marketplace images the server knows (Linux machines boot from them).
var marketplaceImages = []struct{ publisher, offer, sku string }{
	{"Canonical", "ubuntu-24_04-lts", "server"},
	{"Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2"},
}

// imageOf resolves an image reference: a seeded managed image or gallery image (by ID), or a
// marketplace image it knows (publisher, offer, sku and version), returned as its URN; s.mu is
// held.
func (s *Server) imageOf(ref *armcompute.ImageReference) (string, *apiError) {
	if ref.ID != nil && *ref.ID != "" {
		return s.resolveImage(*ref.ID)
	}
	if ref.Publisher == nil || ref.Offer == nil || ref.SKU == nil || ref.Version == nil {
		return "", invalidParameter("imageReference",
			"storageProfile.imageReference needs an id (a managed or gallery image), or publisher, offer, sku and version (a marketplace image).")
	}
	for _, m := range marketplaceImages {
		if strings.EqualFold(m.publisher, *ref.Publisher) && strings.EqualFold(m.offer, *ref.Offer) && strings.EqualFold(m.sku, *ref.SKU) {
			return strings.Join([]string{m.publisher, m.offer, m.sku, *ref.Version}, ":"), nil
		}
	}
	return "", newError(http.StatusNotFound, "PlatformImageNotFound",
		"The platform image '%s:%s:%s:%s' is not available. Verify that all fields in the storage profile are correct (armtest knows %v).",
		*ref.Publisher, *ref.Offer, *ref.SKU, *ref.Version, marketplaceImages)
}

// The image kinds are read-only: images are seeded by AddImage.
var managedImageKind = kind{
	typ: typeImage, path: groupPath + "Microsoft.Compute/images/{}", version: ComputeAPIVersion,
	find: findImage, view: func(_ *Server, r any, _ string) any { return as[*image](r).view() },
}

var imageVersionKind = kind{
	typ: typeImageVersion, path: groupPath + "Microsoft.Compute/galleries/{}/images/{}/versions/{}", version: GalleryAPIVersion,
	find: findImage, view: func(_ *Server, r any, _ string) any { return as[*image](r).view() },
}

func findImage(s *Server, id string) any { return found(s.images[strings.ToLower(id)]) }

// view is an image as GET returns it: a managed image or a gallery image version.
func (im *image) view() any {
	tags := map[string]*string{}
	for k, v := range im.tags {
		tags[k] = to.Ptr(v)
	}
	if !im.version {
		return armcompute.Image{
			ID: to.Ptr(im.id), Name: to.Ptr(lastSegment(im.id)), Type: to.Ptr(typeImage), Location: to.Ptr(im.location), Tags: tags,
			Properties: &armcompute.ImageProperties{
				ProvisioningState: to.Ptr(stateSucceeded),
				HyperVGeneration:  to.Ptr(armcompute.HyperVGenerationTypesV2),
				StorageProfile: &armcompute.ImageStorageProfile{OSDisk: &armcompute.ImageOSDisk{
					OSType: to.Ptr(armcompute.OperatingSystemTypesWindows), OSState: to.Ptr(armcompute.OperatingSystemStateTypesGeneralized),
				}},
			},
		}
	}
	return armcompute.GalleryImageVersion{
		ID: to.Ptr(im.id), Name: to.Ptr(lastSegment(im.id)), Type: to.Ptr(typeImageVersion), Location: to.Ptr(im.location), Tags: tags,
		Properties: &armcompute.GalleryImageVersionProperties{
			ProvisioningState: to.Ptr(armcompute.GalleryProvisioningStateSucceeded),
			PublishingProfile: &armcompute.GalleryImageVersionPublishingProfile{
				PublishedDate: to.Ptr(im.added),
				TargetRegions: []*armcompute.TargetRegion{{Name: to.Ptr(im.location), RegionalReplicaCount: to.Ptr[int32](1)}},
			},
			StorageProfile: &armcompute.GalleryImageVersionStorageProfile{
				OSDiskImage: &armcompute.GalleryOSDiskImage{HostCaching: to.Ptr(armcompute.HostCachingReadWrite)},
			},
		},
	}
}
