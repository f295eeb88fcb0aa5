module example.com/compat

go 1.26.0
