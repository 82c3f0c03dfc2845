package driver

// Lookup returns the kernel called name from the generated table, or nil.
func Lookup(name string) *KernelInfo {
	for i := range Kernels {
		if Kernels[i].Name == name {
			return &Kernels[i]
		}
	}
	return nil
}
