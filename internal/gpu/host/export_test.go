package host

// Test hooks.
var (
	CTable            = cTable
	SetUcontextFibers = setUcontextFibers
)
