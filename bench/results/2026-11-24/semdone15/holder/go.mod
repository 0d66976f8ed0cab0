module holder

go 1.26
