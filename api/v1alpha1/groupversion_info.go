// Package v1alpha1 holds the planner.progress.io/v1alpha1 API: the
// ProgressForecast resource the controller keeps for each tracked TrainJob.
//
// +kubebuilder:object:generate=true
// +groupName=planner.progress.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "planner.progress.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this group-version.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group-version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
