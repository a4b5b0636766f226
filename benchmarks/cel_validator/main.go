// What kube-apiserver's CEL validation costs per status write of a custom resource, measured
// in process with the server's own code (k8s.io/apiextensions-apiserver v0.32.13, the version
// of the reference control plane), so the figures do not move with the machine's load the way
// a server's CPU does. Run through benchmarks/bench_cel_validator.py, which writes the objects
// and the CRD variants; docs/PERFORMANCE.md (issue #19) has the results.
//
//	go run . -new NEW.json -old OLD.json [-rounds 5] CRD.yaml...
//
// For each CRD file: the structural schema of its first version, the validator the server
// builds for it (cel.NewValidator, as customresource.NewStrategy does) and the call its status
// strategy makes on every status update (Validate with the new and the old object, no
// ratcheting option), both objects defaulted by the schema as the server defaults a request and
// what it reads from etcd. Prints one tab-separated line per CRD: the file, the best of -rounds
// ns per write, allocations and bytes per write, and the number of validation errors (a
// benchmark object must pass, or the figures measure a failure path).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/util/json"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

func loadSchema(path string) (*structuralschema.Structural, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(crd.Spec.Versions) == 0 || crd.Spec.Versions[0].Schema == nil {
		return nil, fmt.Errorf("%s: no schema in spec.versions[0]", path)
	}
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema, &internal, nil); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return structuralschema.NewStructural(&internal)
}

func loadObject(path string, s *structuralschema.Structural) (map[string]interface{}, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var obj map[string]interface{}
	// apimachinery's json gives int64 for integers, as the server's decoder does.
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	structuraldefaulting.Default(obj, s)
	return obj, nil
}

type result struct {
	ns, allocs, bytes int64
	errors            int
}

func measure(crd, newPath, oldPath string) (result, error) {
	s, err := loadSchema(crd)
	if err != nil {
		return result{}, err
	}
	newObj, err := loadObject(newPath, s)
	if err != nil {
		return result{}, err
	}
	oldObj, err := loadObject(oldPath, s)
	if err != nil {
		return result{}, err
	}
	v := cel.NewValidator(s, true, celconfig.PerCallLimit)
	if v == nil { // no rules at all: the server skips CEL
		return result{}, nil
	}
	ctx := context.Background()
	errs, _ := v.Validate(ctx, nil, s, newObj, oldObj, celconfig.RuntimeCELCostBudget)
	r := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			v.Validate(ctx, nil, s, newObj, oldObj, celconfig.RuntimeCELCostBudget)
		}
	})
	return result{r.NsPerOp(), r.AllocsPerOp(), r.AllocedBytesPerOp(), len(errs)}, nil
}

func main() {
	newPath := flag.String("new", "", "the object as written (JSON)")
	oldPath := flag.String("old", "", "the object as stored before the write (JSON)")
	rounds := flag.Int("rounds", 5, "rounds over all CRDs; the best time of each is printed")
	flag.Parse()
	if *newPath == "" || *oldPath == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: cel_validator -new NEW.json -old OLD.json [-rounds N] CRD.yaml...")
		os.Exit(2)
	}
	best := make(map[string]result)
	for round := 0; round < *rounds; round++ {
		for _, crd := range flag.Args() {
			r, err := measure(crd, *newPath, *oldPath)
			if err != nil {
				fmt.Fprintln(os.Stderr, "cel_validator:", err)
				os.Exit(1)
			}
			if prev, ok := best[crd]; !ok || r.ns < prev.ns {
				best[crd] = r
			}
		}
	}
	for _, crd := range flag.Args() {
		r := best[crd]
		fmt.Printf("%s\t%d\t%d\t%d\t%d\n", crd, r.ns, r.allocs, r.bytes, r.errors)
	}
}
